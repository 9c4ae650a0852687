"""Session cells in the sandbox steps (``SandboxActivities.cells``): a cell's first step
opens its session (live, warm, restored from its saved state, or rebuilt by replaying its
cells) and runs the cell in it; its end keeps or rolls back what it did and parks the session
until the next cell (``cell_ends.py``, ``workflows/session_workflow.py``)."""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

from codemode.runtimes import CodeExecutionError, CodeRuntime
from codemode.runtimes.errors import NonDeterminismError, SandboxError
from codemode.runtimes.session import CellReplay, CodeSession, replay_cells
from codemode.runtimes.types import CheckpointTier

from .cell_ends import CellEnds, session_tag, warm_key
from .checkpoints import CheckpointScope, CheckpointUnusable, load_segments, session_scope, step_scope
from .models import (
    SESSION_GONE,
    CellEnd,
    CellRecipe,
    CellRef,
    SegmentRef,
    SessionRecipe,
    StartInput,
    StepResult,
    Via,
)
from .sandbox_host import SandboxHost
from .step_loop import StepLoop, error_info
from .tools import ToolSpec

log = logging.getLogger(__name__)


class SessionCells:
    def __init__(self, host: SandboxHost, steps: StepLoop, ends: CellEnds) -> None:
        self.host, self.steps, self.ends = host, steps, ends

    async def start_cell(self, runtime: CodeRuntime, specs: dict[str, ToolSpec], inp: StartInput) -> StepResult:
        """The first step of a cell: the session (live, warm, restored from its state, or
        rebuilt by replaying its cells), then the cell's code in it."""
        assert inp.cell is not None
        cell = CellRef(scope=inp.cell.scope, state=inp.cell.state)
        try:
            session, via, reason = await self.open_session(runtime, inp, use_live=True)
        except CodeExecutionError as err:  # the session cannot be rebuilt (or the runtime has none)
            return StepResult(kind="error", error=error_info(err), via="replayed", cell=CellEnd(effect="rolled_back"))
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await session.run(inp.code, functions=sigs, inputs=inp.inputs)
        except CodeExecutionError as err:  # it cannot start: the session is as it was
            end = await self.ends.park_session(session, cell, "none") if session.alive else CellEnd(effect="rolled_back")
            return StepResult(kind="error", error=error_info(err), via=via, fallback=reason, cell=end)
        except SandboxError as err:
            await session.close()
            raise ApplicationError(f"the {inp.runtime} sandbox failed: {err}", type="SandboxError") from err
        scope = step_scope(inp.execution_id, inp.first_run_id)
        defer = (inp.defer_bytes, 0) if inp.defer_bytes > 0 else None
        return await self.steps.drive(
            execution, specs, scope, stdout_offset=0, via=via, fallback=reason, defer=defer, cell=cell
        )

    async def open_session(
        self, runtime: CodeRuntime, start: StartInput, *, use_live: bool
    ) -> tuple[CodeSession, Via, str | None]:
        """The session a cell runs in, how it was had, and why a faster way was not possible."""
        cell = start.cell
        assert cell is not None
        scope = session_scope(cell.scope)
        tag = session_tag(start)
        reason: str | None = None
        if use_live and cell.live:
            kept = self.host.live.kept_sessions.pop(cell.live, None)
            if kept is None or not kept.session.alive:
                raise ApplicationError(
                    "the session's live sandbox is not on this worker (it restarted, or the keep-alive expired)",
                    type=SESSION_GONE,
                    non_retryable=True,
                )
            if kept.expiry is not None:
                kept.expiry.cancel()
            if kept.session.tag == tag:
                return kept.session, "live", None
            await kept.session.close()
            reason = "the cell asks for other limits, sandbox options or seed than the live session has"
        try:
            if cell.state is not None:
                warm = self.host.live.warm_sessions.pop(warm_key(scope, cell.state, tag), None)
                if warm is not None and warm.alive:
                    return warm, "live", None
                try:
                    blob = await self.host.checkpoints.load(scope, cell.state)
                    session = await runtime.open_session(
                        limits=start.limits, determinism=start.determinism, options=start.options, state=blob
                    )
                    if session is not None:
                        session.tag = tag
                        return session, "restored", None
                    reason = f"the session's state was written by another version of the {start.runtime} runtime"
                    if runtime.capabilities.checkpoint_tier is CheckpointTier.SESSION:
                        reason = "the sandbox the session's state names is gone or out of step"
                except CheckpointUnusable as err:
                    reason = str(err)
            session = await runtime.open_session(
                limits=start.limits, determinism=start.determinism, options=start.options
            )
        except SandboxError as err:
            raise ApplicationError(f"the {start.runtime} sandbox failed to start: {err}", type="SandboxError") from err
        assert session is not None
        session.tag = tag
        if not cell.has_recipe:
            return session, "started", reason
        try:
            await replay_cells(session, await self.cell_replays(scope, cell.recipe_segments, cell.recipe))
        except CodeExecutionError as err:
            await session.close()
            raise NonDeterminismError(
                f"{err.message} (the session cannot be rebuilt: start over with restart)",
                error_type=err.error_type,
                line=err.line,
            ) from None
        except SandboxError as err:
            await session.close()
            raise ApplicationError(f"the {start.runtime} sandbox failed: {err}", type="SandboxError") from err
        return session, "replayed", reason or cell.replay_reason or "nothing else holds the session"

    async def cell_replays(
        self, scope: CheckpointScope, segments: list[SegmentRef], recipe: list[CellRecipe]
    ) -> list[CellReplay]:
        cells: list[CellRecipe] = []
        for ref in segments:
            cells.extend(SessionRecipe.model_validate_json(await self.load_blob(scope, ref)).cells)
        cells.extend(recipe)
        replays = []
        for number, entry in enumerate(cells, 1):
            try:
                specs = self.host.registry.for_execution(entry.tools)
            except (KeyError, ValueError) as err:
                raise NonDeterminismError(
                    f"rebuilding the session, earlier cell {number} used a tool this worker does not have: {err}",
                    error_type="NonDeterminismError",
                ) from None
            journal = (await load_segments(self.host.checkpoints, scope, [entry.journal])).journal if entry.journal else []
            replays.append(
                CellReplay(
                    code=entry.code,
                    functions={n: s.signature for n, s in specs.items()},
                    inputs=entry.inputs,
                    journal=journal,
                    raised=entry.raised,
                )
            )
        return replays

    async def load_blob(self, scope: CheckpointScope, ref: SegmentRef) -> bytes:
        try:
            return await self.host.checkpoints.load(scope, ref, kind="seg")
        except CheckpointUnusable as err:
            raise ApplicationError(f"the session's stored cells are unusable: {err}", type="StateLost") from err
