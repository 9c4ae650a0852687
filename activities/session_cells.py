"""Session cells in the sandbox steps (mixed into ``SandboxActivities``): a cell's first step
opens its session (live, warm, restored from its saved state, or rebuilt by replaying its
cells) and runs the cell in it; its end keeps or rolls back what it did and parks the session
until the next cell (``workflows/session_workflow.py``)."""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

from codemode.runtimes import CodeExecution, CodeExecutionError, CodeRuntime
from codemode.runtimes.errors import NonDeterminismError, SandboxError
from codemode.runtimes.session import CellReplay, CodeSession, replay_cells
from codemode.runtimes.types import CheckpointTier

from .checkpoints import CheckpointScope, CheckpointUnusable
from .models import (
    SESSION_GONE,
    CellEffect,
    CellEnd,
    CellRecipe,
    CellRef,
    CheckpointRef,
    SegmentRef,
    SessionRecipe,
    StartInput,
    StepResult,
    Via,
)
from .parking import cannot_pause, running_grace
from .records import ErrorInfo
from .step_loop import error_info, session_scope, step_scope
from .tools import ToolSpec

log = logging.getLogger(__name__)


class SessionCells:
    """The state these methods use is set up by ``SandboxActivities.__init__``."""

    async def _start_cell(self, runtime: CodeRuntime, specs: dict[str, ToolSpec], inp: StartInput) -> StepResult:
        """The first step of a cell: the session (live, warm, restored from its state, or
        rebuilt by replaying its cells), then the cell's code in it."""
        assert inp.cell is not None
        cell = CellRef(scope=inp.cell.scope, state=inp.cell.state)
        try:
            session, via, reason = await self._open_session(runtime, inp, use_live=True)
        except CodeExecutionError as err:  # the session cannot be rebuilt (or the runtime has none)
            return StepResult(kind="error", error=error_info(err), via="replayed", cell=CellEnd(effect="rolled_back"))
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await session.run(inp.code, functions=sigs, inputs=inp.inputs)
        except CodeExecutionError as err:  # it cannot start: the session is as it was
            end = await self._park_session(session, cell, "none") if session.alive else CellEnd(effect="rolled_back")
            return StepResult(kind="error", error=error_info(err), via=via, fallback=reason, cell=end)
        except SandboxError as err:
            await session.close()
            raise ApplicationError(f"the {inp.runtime} sandbox failed: {err}", type="SandboxError") from err
        scope = step_scope(inp.execution_id, inp.first_run_id)
        defer = (inp.defer_bytes, 0) if inp.defer_bytes > 0 else None
        return await self._drive(
            execution, specs, scope, stdout_offset=0, via=via, fallback=reason, defer=defer, cell=cell
        )

    async def _open_session(
        self, runtime: CodeRuntime, start: StartInput, *, use_live: bool
    ) -> tuple[CodeSession, Via, str | None]:
        """The session a cell runs in, how it was had, and why a faster way was not possible."""
        cell = start.cell
        assert cell is not None
        scope = session_scope(cell.scope)
        tag = _session_tag(start)
        reason: str | None = None
        if use_live and cell.live:
            kept = self._kept_sessions.pop(cell.live, None)
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
                warm = self._warm_sessions.pop(_warm_key(scope, cell.state, tag), None)
                if warm is not None and warm.alive:
                    return warm, "live", None
                try:
                    blob = await self.checkpoints.load(scope, cell.state)
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
            await replay_cells(session, await self._cell_replays(scope, cell.recipe_segments, cell.recipe))
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

    async def _cell_replays(
        self, scope: CheckpointScope, segments: list[SegmentRef], recipe: list[CellRecipe]
    ) -> list[CellReplay]:
        cells: list[CellRecipe] = []
        for ref in segments:
            cells.extend(SessionRecipe.model_validate_json(await self._load_blob(scope, ref)).cells)
        cells.extend(recipe)
        replays = []
        for number, entry in enumerate(cells, 1):
            try:
                specs = self.registry.for_execution(entry.tools)
            except (KeyError, ValueError) as err:
                raise NonDeterminismError(
                    f"rebuilding the session, earlier cell {number} used a tool this worker does not have: {err}",
                    error_type="NonDeterminismError",
                ) from None
            journal = (await self._load_segments(scope, [entry.journal])).journal if entry.journal else []
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

    async def _load_blob(self, scope: CheckpointScope, ref: SegmentRef) -> bytes:
        try:
            return await self.checkpoints.load(scope, ref, kind="seg")
        except CheckpointUnusable as err:
            raise ApplicationError(f"the session's stored cells are unusable: {err}", type="StateLost") from err

    async def _end_cell(self, execution: CodeExecution, cell: CellRef, error: ErrorInfo | None) -> CellEnd:
        """A cell ended. What it did stays when it completed or its code raised (notebook
        semantics); a cell stopped by a limit, or whose sandbox died, is rolled back (the
        session is as it was before it: exactly what a rebuild would give)."""
        session = execution.session
        if session is None:
            return CellEnd(effect="rolled_back")
        if not session.alive or (error is not None and error.kind != "runtime"):
            await session.close()
            return CellEnd(effect="rolled_back")
        return await self._park_session(session, cell, "kept")

    async def _park_session(self, session: CodeSession, cell: CellRef, effect: CellEffect) -> CellEnd:
        """Between cells: save the session's state (and keep it warm here), pause a sandbox
        that costs compute, or keep the live process on this worker."""
        runtime = self.runtime(session.runtime)
        scope = session_scope(cell.scope)
        try:
            variables = await session.variables()
            blob = await session.dump()
        except SandboxError as err:
            await session.close()
            log.info("could not save the session after its cell: %s", err)
            return CellEnd(effect="rolled_back")
        if not session.alive:
            return CellEnd(effect="rolled_back")
        if blob is None:
            key = self._keep_session(session, cell.scope.session_id)
            return CellEnd(effect=effect, live=key, live_queue=self.session_queue, variables=variables)
        ref = await self.checkpoints.save(scope, blob)
        if cell.state is not None and cell.state != ref:
            self._delete_later(scope, cell.state)  # the session moved past it
        end = CellEnd(effect=effect, state=ref, variables=variables)
        if runtime.capabilities.checkpoint_tier is CheckpointTier.SESSION:
            why = cannot_pause(runtime) if getattr(runtime, "parks_as", "running") == "running" else None
            try:
                await runtime.suspend(blob)  # paused between cells: no compute while idle
            except SandboxError as err:
                log.warning("could not pause the session's sandbox: %s", err)
                why = f"pausing it failed: {err}"
            await session.close()  # detaches; the sandbox is its state
            if why is not None:  # it runs while idle: the session releases it after the grace period
                end.release_after, end.running_why = running_grace(runtime, why)
        else:
            self._keep_warm(_warm_key(scope, ref, session.tag), session)
        return end


def _session_tag(start: StartInput) -> str:
    """What a live session was opened with: limits, sandbox options, seed and clock."""
    import hashlib

    parts = [start.limits.model_dump_json(), start.options.model_dump_json() if start.options else ""]
    parts.append(start.determinism.model_dump_json() if start.determinism else "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _warm_key(scope: CheckpointScope, ref: CheckpointRef, tag: str | None) -> str:
    return f"{scope.root}{ref.sha256}:{tag}"
