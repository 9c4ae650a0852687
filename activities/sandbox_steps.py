"""Sandbox steps as activities: start (type-check, run to the first calls), resume
(continue from a live session, a checkpoint, or by journal replay; answer; run on) and
release (pause a parked run's sandbox, or free it when the execution is over).

A step is idempotent under retry: for Monty it is a pure function of (checkpoint, answers),
so any worker can run any step. Checkpoints go to the object store and the step returns
only their reference (``activities/checkpoints.py``); the next step verifies the hash before
loading one, and deletes the checkpoint before it, which recorded history has moved past.
A Monty step waiting for one call may defer its checkpoint (``DEFER_SECONDS``, and the
workflow's ``DEFER_ENTRIES`` / ``DEFER_BYTES``): it keeps the run live here instead, and its
durable state is the checkpoint before (or the start) plus the journal entries since, which
the workflow holds and sends to the step that must rebuild it (``ResumeInput.tail``).
Runtimes that cannot checkpoint keep their process live on the worker that ran the step (a
keep-alive window), advertise that worker's own task queue, and are rebuilt by journal
replay anywhere else; only then does the workflow send the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from codemode.runtimes import CodeExecution, CodeExecutionError, CodeRuntime, ExecutionResult, FunctionCall
from codemode.runtimes.errors import SandboxError
from codemode.runtimes.journal_replay import JournalEntry, replay
from codemode.runtimes.runner.owner import SandboxOwner, owned_by
from codemode.runtimes.types import CheckpointTier, compact_json

from . import names
from .cell_ends import CellEnds
from .checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable, load_segments, session_scope, step_scope
from .live_runs import LiveSession, cache_key, live_key
from .models import (
    CHECKPOINT_REFUSED,
    SESSION_GONE,
    CellEnd,
    CellRecipe,
    CellRef,
    CellStart,
    LoadStateInput,
    NextStep,
    ParkResult,
    ReleaseInput,
    ResumeInput,
    SaveStateInput,
    SegmentRef,
    SessionRecipe,
    SessionRecipeInput,
    SessionRecipeRefs,
    SessionReleaseInput,
    StartInput,
    StateSegment,
    StepResult,
    Via,
)
from .parking import Parking
from .records import ErrorInfo
from .sandbox_host import SandboxHost
from .sandbox_sweep import SandboxSweeper, SandboxSweepInput, SandboxSweepReport
from .session_cells import SessionCells
from .step_loop import Ratchet, StepLoop, answer, error_info, replay_from_checkpoint
from .tools import ToolRegistry, ToolSpec

log = logging.getLogger(__name__)


class SandboxActivities:
    """The step activities of one worker (start, resume, release, park, and the stored state
    of long runs and of sessions). Their parts share one declared ``SandboxHost`` (the
    registry, the checkpoint store, the runtimes, the live runs): the step loop
    (``step_loop.py``), session cells (``session_cells.py``) and their ends (``cell_ends.py``),
    parking (``parking.py``) and the sandbox sweep (``sandbox_sweep.py``)."""

    def __init__(self, registry: ToolRegistry, checkpoints: CheckpointStore, **options: Any) -> None:
        """``options``: the host's (``SandboxHost``: ``runtimes``, ``session_queue``,
        ``keep_alive_seconds``, the snapshot cache's size, ``session_keep_alive_seconds``,
        ``artifact_limits``)."""
        self.host = SandboxHost(registry, checkpoints, **options)
        self.live = self.host.live
        self.ends = CellEnds(self.host)
        self.steps = StepLoop(self.host, self.ends)
        self.cells = SessionCells(self.host, self.steps, self.ends)
        self.parking = Parking(self.host)
        self.sweeper = SandboxSweeper(self.host)

    # -- the host's, for the worker that holds these activities -------------------------------

    @property
    def registry(self) -> ToolRegistry:
        return self.host.registry

    @property
    def checkpoints(self) -> CheckpointStore:
        return self.host.checkpoints

    def runtime(self, name: str) -> CodeRuntime:
        return self.host.runtime(name)

    async def aclose(self) -> None:
        await self.host.aclose()

    def holds_process(self, session_id: str) -> bool:
        """Whether this worker keeps the live process ``session_id`` (or is still stepping it)."""
        return self.live.holds_process(session_id)

    @property
    def live_sessions(self) -> int:
        """Sandboxes held live for runtimes without checkpoints (a parked run holds none)."""
        return len(self.live.sessions)

    @property
    def kept_sessions(self) -> int:
        """Sessions this worker keeps live between cells (python)."""
        return len(self.live.kept_sessions)

    def kept_session_owners(self) -> list[tuple[str, str]]:
        """(session workflow id, key) of every session kept live here."""
        return self.live.kept_session_owners()

    @property
    def _snapshots(self) -> OrderedDict[str, LiveSession]:
        return self.live.snapshots  # (the tests look into the cache)

    @property
    def _spilled(self) -> OrderedDict[str, Any]:
        return self.live.spilled

    async def sweep_sandboxes(self, client: Client, inp: SandboxSweepInput | None = None) -> SandboxSweepReport:
        """Destroy the sandboxes no open execution names (``activities/sandbox_sweep.py``)."""
        return await self.sweeper.sweep(client, inp)

    def activities(self) -> list[Any]:
        return [
            self.start,
            self.resume,
            self.release,
            self.park,
            self.save_state,
            self.load_state,
            self.release_session,
            self.save_recipe,
        ]

    # -- activities ---------------------------------------------------------------------

    @activity.defn(name=names.SANDBOX_START)
    async def start(self, inp: StartInput) -> StepResult:
        async with _heartbeating():
            with owned_by(await self._owner(inp.execution_id, inp.cell)):
                return await self._start(inp)

    @activity.defn(name=names.SANDBOX_RESUME)
    async def resume(self, inp: ResumeInput) -> StepResult:
        async with _heartbeating():
            with owned_by(await self._owner(inp.execution_id, inp.cell or (inp.start.cell if inp.start else None))):
                return await self._resume_and_release(inp)

    async def step_after_tool(
        self, then: NextStep, execution_id: str, answer: JournalEntry, spent: int = 0
    ) -> StepResult:
        """The resume step a tool activity runs after its call (``ToolInput.then``), bounded
        by ``then.step_timeout``. Any failure comes back as an exception for the tool
        activity to report in-band: the tool's result is final either way. ``spent``: the
        JSON bytes of the call's arguments and result (what deferring its checkpoint adds to
        the journal tail the workflow holds).

        A live process (``then.session_id``) is stepped only on the worker that keeps it, and
        a step that outlasts ``then.step_timeout`` is not cut short: it is handed over to the
        workflow's own resume step, which comes to this worker (``LiveRuns.hand_over``)."""
        inp = then.resume_input(execution_id, answer)
        with owned_by(await self._owner(execution_id, inp.cell)):
            return await self._step_after_tool(inp, then, spent)

    async def _owner(self, execution_id: str, cell: CellStart | CellRef | None) -> SandboxOwner | None:
        """Whom a sandbox made by the running step belongs to (its labels)."""
        if not activity.in_activity():
            return None
        try:
            client = activity.client()
        except RuntimeError:  # an activity run without a client (the SDK's ActivityEnvironment)
            return step_owner(execution_id, cell)
        return step_owner(execution_id, cell, await self.sweeper.cluster_of(client))

    async def _step_after_tool(self, inp: ResumeInput, then: NextStep, spent: int) -> StepResult:
        if inp.session_id is None:
            defer = (then.defer_bytes - spent, spent) if then.defer_bytes > 0 else None
            return await asyncio.wait_for(self._resume_and_release(inp, defer=defer), then.step_timeout)
        if not self.holds_process(inp.session_id):
            raise LookupError("the live sandbox is on another worker")
        step = asyncio.ensure_future(self._resume(inp))
        try:
            return await asyncio.wait_for(asyncio.shield(step), then.step_timeout)
        except asyncio.TimeoutError:
            self.live.hand_over(inp.session_id, step)
            raise
        except asyncio.CancelledError:
            step.cancel()
            raise

    async def _resume_and_release(self, inp: ResumeInput, defer: tuple[int, int] | None = None) -> StepResult:
        step = await self._resume(inp, defer)
        # The code ended: free the checkpoint this step consumed now rather than in a release
        # step (one local activity fewer per execution). Only a snapshot names nothing live; a
        # retry of this step that finds it gone replays the journal, like any missing checkpoint.
        if (
            step.kind != "calls"
            and inp.checkpoint is not None
            and not inp.session_id
            and self.runtime(inp.runtime).capabilities.checkpoint_tier is CheckpointTier.SNAPSHOT
        ):
            self.host.deletions.delete_later(step_scope(inp.execution_id, inp.first_run_id), inp.checkpoint)
            step.released = True
        return step

    @activity.defn(name=names.SANDBOX_RELEASE)
    async def release(self, inp: ReleaseInput) -> None:
        """Drop this worker's live handle on the execution; then pause (``suspend``) or free
        (``discard``) what its checkpoint names. Discard also deletes the last checkpoint."""
        if inp.session_id:
            await self.live.drop(inp.session_id)
        scope = step_scope(inp.execution_id, inp.first_run_id)
        if inp.live:  # a deferred run: held here, or spilled to the store
            key = live_key(inp.execution_id, inp.live)
            held = self.live.snapshots.pop(key, None)
            if held is not None:
                await held.execution.close()
            spilled = await self.live.take_spill(key)
            if spilled is not None:
                await self.host.deletions.delete_quietly(scope, spilled[0])
        if inp.checkpoint is None:
            return
        live = self.live.snapshots.pop(cache_key(inp.execution_id, inp.checkpoint), None)
        if live is not None:
            await live.execution.close()
        if inp.mode == "discard" and inp.superseded is not None and inp.superseded != inp.checkpoint:
            await self.host.deletions.delete_quietly(scope, inp.superseded)
        runtime = self.runtime(inp.runtime)
        try:
            blob = await self.checkpoints.load(scope, inp.checkpoint)
        except CheckpointUnusable:
            return  # nothing left to pause or free
        if inp.mode == "suspend":
            await runtime.suspend(blob)
        else:
            if not inp.cell:
                await runtime.discard(blob)
            await self.checkpoints.delete(scope, inp.checkpoint)

    @activity.defn(name=names.SANDBOX_PARK)
    async def park(self, inp: ReleaseInput) -> ParkResult:
        """Pause the sandbox of a run about to wait for a person, or say it keeps running
        and for how long it may (``parking.py``)."""
        return await self.parking.park(inp)

    @activity.defn(name=names.SANDBOX_SAVE_STATE)
    async def save_state(self, inp: SaveStateInput) -> SegmentRef:
        """Store a segment of a long execution's state (journal and call records) before it
        continues as new: the next run carries only the reference."""
        blob = compact_json(inp.segment)
        ref = await self.checkpoints.save(step_scope(inp.execution_id, inp.first_run_id), blob, kind="seg")
        return SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(inp.segment.calls))

    @activity.defn(name=names.SANDBOX_LOAD_STATE)
    async def load_state(self, inp: LoadStateInput) -> StateSegment:
        """The stored segments, joined (their hashes verified)."""
        return await load_segments(self.checkpoints, step_scope(inp.execution_id, inp.first_run_id), inp.segments)

    async def _start(self, inp: StartInput) -> StepResult:
        try:
            specs = self.registry.for_execution(inp.tools)
            runtime = self.runtime(inp.runtime)
        except (KeyError, ValueError, ImportError) as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            return StepResult(
                kind="error", error=ErrorInfo(type="ValueError", message=str(msg), kind="input"), via="started"
            )
        if inp.cell is not None:
            return await self.cells.start_cell(runtime, specs, inp)
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await runtime.execute(
                inp.code,
                functions=sigs,
                inputs=inp.inputs,
                limits=inp.limits,
                # the first start: the runtime may choose the hash seed (a warm interpreter's)
                determinism=inp.determinism.first_start() if inp.determinism else None,
                options=inp.options,
            )
        except CodeExecutionError as err:
            return StepResult(kind="error", error=error_info(err), via="started")
        except SandboxError as err:
            raise ApplicationError(f"the {inp.runtime} sandbox failed to start: {err}", type="SandboxError") from err
        scope = step_scope(inp.execution_id, inp.first_run_id)
        defer = (inp.defer_bytes, 0) if inp.defer_bytes > 0 else None
        step = await self.steps.drive(execution, specs, scope, stdout_offset=0, via="started", defer=defer)
        step.hash_seed = execution.chosen_hash_seed  # recorded: a replay starts with the same
        return step

    async def _resume(self, inp: ResumeInput, defer: tuple[int, int] | None = None) -> StepResult:
        if (handed := await self.live.handed_over_step(inp.session_id)) is not None:
            return handed  # a tool activity began this very step here (its answers are in)
        began = time.perf_counter()
        runtime = self.runtime(inp.runtime)
        scope = step_scope(inp.execution_id, inp.first_run_id)
        if inp.superseded is not None and inp.superseded != inp.checkpoint:
            self.host.deletions.delete_later(scope, inp.superseded)
        execution: CodeExecution | None = None
        specs: dict[str, ToolSpec] | None = None
        via: Via = "live"
        stdout_offset = inp.stdout_offset
        refused: str | None = inp.replay_reason
        unsaved_s = 0.0
        size = 0
        #: Journal entries to answer from before this step's answers (a rebuilt live run).
        tail: list[JournalEntry] | None = None
        key = live_key(inp.execution_id, inp.live) if inp.live else None
        held = self.live.snapshots.pop(key, None) if key else None
        if held is not None:
            execution, specs, stdout_offset = held.execution, held.specs, held.stdout_offset
            unsaved_s, size = held.unsaved_s, held.size
        elif key and (unspilled := await self.live.unspill(key)) is not None:
            execution, spilled = unspilled
            specs, stdout_offset, unsaved_s, size = spilled.specs, 0, spilled.unsaved_s, spilled.size
            via = "restored"
        elif inp.live and (len(inp.tail) < inp.tail_entries or (inp.checkpoint is None and inp.start is None)):
            # The run went on past its checkpoint on another worker (or this one restarted):
            # only the workflow holds the journal entries to rebuild it from.
            raise ApplicationError(
                "the live run is not on this worker; rebuild it from the journal",
                type=CHECKPOINT_REFUSED,
                non_retryable=True,
            )
        elif inp.session_id:
            live = self.live.sessions.pop(inp.session_id, None)
            if live is not None:
                if live.expiry is not None:
                    live.expiry.cancel()
                execution, specs, stdout_offset = live.execution, live.specs, live.stdout_offset
            else:
                refused = refused or "the live sandbox is gone (its worker restarted or its keep-alive expired)"
        elif inp.checkpoint is not None:
            if inp.live:
                tail, unsaved_s = inp.tail, float("inf")  # rebuilt: save a checkpoint this time
            cached = self.live.snapshots.pop(cache_key(inp.execution_id, inp.checkpoint), None)
            if cached is not None:
                execution, specs, stdout_offset = cached.execution, cached.specs, cached.stdout_offset
                size = cached.size
                if tail is not None:
                    stdout_offset += inp.base_stdout
            else:
                try:
                    blob = await self.checkpoints.load(scope, inp.checkpoint)
                    execution = await runtime.restore(blob)
                    if execution is None:
                        refused = runtime.restore_refusal(blob)
                except CheckpointUnusable as err:
                    refused = str(err)
                via = "restored"
                # a restored handle prints only what comes after the checkpoint
                stdout_offset = inp.base_stdout if tail is not None else 0
                size = inp.checkpoint.size
        if execution is None:
            if inp.start is not None:
                return await self._replay(runtime, inp, scope, refused)
            raise ApplicationError(
                f"{refused or 'nothing to resume from'}; send the journal to replay",
                type=SESSION_GONE if inp.session_id else CHECKPOINT_REFUSED,
                non_retryable=True,
            )
        if specs is None:
            specs = self.registry.for_execution(inp.tools)
        first: list[FunctionCall] | ExecutionResult | None = None
        ratchet = Ratchet(execution, specs)
        try:
            if tail:
                first = await replay_from_checkpoint(execution, [*tail, *inp.answers], ratchet)
            else:
                for ans in inp.answers:
                    await answer(execution, ans, ratchet)
        except CodeExecutionError as err:
            await execution.close()
            return StepResult(kind="error", error=error_info(err), via=via, network_cut=ratchet.cut)
        except SandboxError as err:
            if via != "live" or inp.checkpoint is None:
                await execution.close()
                raise ApplicationError(f"the sandbox failed: {err}", type="SandboxError") from err
            # A handle this worker kept, but another worker has since moved the sandbox on:
            # drop it and continue from the checkpoint like any other worker would.
            log.info("kept sandbox handle is stale (%s); restoring from the checkpoint", err)
            await execution.close()
            return await self._resume(inp, defer)  # the live handle is gone from the cache now
        return ratchet.noted(
            await self.steps.drive(
                execution,
                specs,
                scope,
                stdout_offset=stdout_offset,
                via=via,
                first=first,
                defer=defer,
                unsaved_s=unsaved_s + (time.perf_counter() - began),
                size=size,
                cell=inp.cell,
            )
        )

    async def _replay(
        self, runtime: CodeRuntime, inp: ResumeInput, scope: CheckpointScope, reason: str | None
    ) -> StepResult:
        assert inp.start is not None
        specs = self.registry.for_execution(inp.start.tools)
        sigs = {n: s.signature for n, s in specs.items()}
        cell: CellRef | None = None
        try:
            if inp.start.cell is not None:  # a cell: its session as it was, then the cell again
                session, _, why = await self.cells.open_session(runtime, inp.start, use_live=False)
                reason = reason or why
                cell = CellRef(scope=inp.start.cell.scope, state=inp.start.cell.state)
                execution = await session.run(inp.start.code, functions=sigs, inputs=inp.start.inputs)
            else:
                execution = await runtime.execute(
                    inp.start.code,
                    functions=sigs,
                    inputs=inp.start.inputs,
                    limits=inp.start.limits,
                    determinism=inp.start.determinism,
                    options=inp.start.options,
                )
        except CodeExecutionError as err:
            end = CellEnd(effect="rolled_back") if inp.start.cell is not None else None
            return StepResult(kind="error", error=error_info(err), via="replayed", fallback=reason, cell=end)
        journal = inp.journal
        if inp.journal_segments:
            journal = (await load_segments(self.checkpoints, scope, inp.journal_segments)).journal + journal
        ratchet = Ratchet(execution, specs)
        try:
            first = await replay(execution, journal, before_answer=ratchet.before)
        except CodeExecutionError as err:
            await execution.close()
            end = await self.ends.end_cell(execution, cell, error_info(err)) if cell is not None else None
            return StepResult(
                kind="error", error=error_info(err), via="replayed", fallback=reason, network_cut=ratchet.cut, cell=end
            )
        except BaseException:
            await execution.close()
            raise
        return ratchet.noted(
            await self.steps.drive(
                execution,
                specs,
                scope,
                stdout_offset=inp.stdout_offset,
                via="replayed",
                first=first,
                fallback=reason,
                cell=cell,
            )
        )

    @activity.defn(name=names.SESSION_SAVE_RECIPE)
    async def save_recipe(self, inp: SessionRecipeInput) -> SessionRecipeRefs:
        """Store the recipe of a session's latest cells (the workflow then carries a reference
        instead). Past ``RECIPE_SEGMENTS`` segments they are merged into one, so what a cell's
        start carries stays bounded however long the session."""
        scope = session_scope(inp.scope)
        if len(inp.segments) + 1 <= RECIPE_SEGMENTS:
            ref = await self.checkpoints.save(scope, compact_json(inp.recipe), kind="seg")
            added = SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(inp.recipe.cells))
            return SessionRecipeRefs(segments=[*inp.segments, added])
        cells: list[CellRecipe] = []
        for old in inp.segments:
            cells.extend(SessionRecipe.model_validate_json(await self.cells.load_blob(scope, old)).cells)
        merged = SessionRecipe(cells=[*cells, *inp.recipe.cells])
        ref = await self.checkpoints.save(scope, compact_json(merged), kind="seg")
        if ref not in inp.segments:  # (a retry after the deletes finds them gone: no matter)
            with contextlib.suppress(Exception):
                await self.checkpoints.delete(scope, *inp.segments, kind="seg")
        return SessionRecipeRefs(segments=[SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(merged.cells))])

    @activity.defn(name=names.SESSION_RELEASE)
    async def release_session(self, inp: SessionReleaseInput) -> None:
        """Let go of a session's state: drop the live process or warm copy held here, free a
        sandbox the state names (e2b: kill it), delete the state; with ``everything``, delete
        all the session stored (it is closing)."""
        scope = session_scope(inp.scope)
        if inp.live:
            await self.live.drop_kept(inp.live)
        for key in [k for k in self.live.warm_sessions if k.startswith(scope.root)]:
            await self.live.warm_sessions.pop(key).close()
        if inp.state is not None:
            try:
                blob = await self.checkpoints.load(scope, inp.state)
                await self.runtime(inp.runtime).discard(blob)
            except CheckpointUnusable:
                pass
            except SandboxError as err:
                log.warning("could not free the session's sandbox: %s", err)
            await self.host.deletions.delete_quietly(scope, inp.state)
        if inp.everything:
            deleted = await self.checkpoints.store.delete_prefix(bucket=self.checkpoints.bucket, prefix=scope.root)
            log.info("session %s closed: %d stored objects deleted", inp.scope.session_id, deleted)


#: Stored segments of a session's recipe before they are merged into one.
RECIPE_SEGMENTS = 8


def step_owner(execution_id: str, cell: CellStart | CellRef | None, cluster: str = "") -> SandboxOwner:
    """Whom a sandbox made by the running step belongs to: its execution, the step's
    activity attempt, the namespace and cluster (and for a cell, its session)."""
    info = activity.info()
    return SandboxOwner(
        execution_id=execution_id,
        step=f"{info.activity_id}#{info.attempt}",
        namespace=info.workflow_namespace,
        session_id=cell.scope.session_id if cell is not None else "",
        cluster=cluster,
    )


@contextlib.asynccontextmanager
async def _heartbeating() -> Any:
    """Heartbeat while a (regular, non-local) step runs, so its loss is noticed in seconds."""
    info = activity.info()
    if info.is_local or not info.heartbeat_timeout:
        yield
        return
    interval = max(info.heartbeat_timeout.total_seconds() / 3, 0.2)

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(interval)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
