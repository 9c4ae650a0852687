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
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json
from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.runtimes import CodeExecution, CodeExecutionError, CodeRuntime, ExecutionResult, FunctionCall, get_runtime
from codemode.runtimes.errors import NonDeterminismError, SandboxError
from codemode.runtimes.journal_replay import JournalEntry, replay
from codemode.runtimes.session import CellReplay, CodeSession, replay_cells
from codemode.runtimes.types import CheckpointTier

from . import names
from .checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable
from .models import (
    CHECKPOINT_REFUSED,
    MAX_VALUE_BYTES,
    SESSION_GONE,
    CallRequest,
    CellEffect,
    CellEnd,
    CellRecipe,
    CellRef,
    CheckpointRef,
    LoadStateInput,
    NextStep,
    ReleaseInput,
    ResumeInput,
    SaveStateInput,
    SegmentRef,
    SessionRecipe,
    SessionRecipeInput,
    SessionRecipeRefs,
    SessionReleaseInput,
    SessionScope,
    StartInput,
    StateSegment,
    StepResult,
    Via,
    clip,
    human_bytes,
)
from .records import ErrorInfo
from .tools import ToolRegistry, ToolSpec

log = logging.getLogger(__name__)


def error_info(err: CodeExecutionError) -> ErrorInfo:
    return ErrorInfo(
        type=err.error_type,
        message=clip(err.message),
        kind=err.kind,
        line=err.line,
        traceback=clip(err.traceback, 4 * 8192) if err.traceback else None,
    )


@dataclass
class _LiveSession:
    execution: CodeExecution
    specs: dict[str, ToolSpec]
    stdout_offset: int
    expiry: asyncio.TimerHandle | None = None
    #: Bytes of the checkpoint it stands for (a proxy for the heap it keeps in memory).
    size: int = 0
    #: Wall seconds of steps since its last saved checkpoint (what a rebuild would redo).
    unsaved_s: float = 0.0
    #: Set for a run kept live instead of a checkpoint (deferred): where to spill it if the
    #: cache must let it go.
    scope: CheckpointScope | None = None


@dataclass
class _KeptSession:
    """A session between cells that this worker keeps live (a runtime without a dump)."""

    session: CodeSession
    expiry: asyncio.TimerHandle | None = None
    #: The session's workflow id (told when this worker lets the process go at shutdown).
    owner: str = ""


class SandboxActivities:
    """The step activities of one worker. Holds the runtimes (one pool each), the checkpoint
    store and, for runtimes without checkpoints, the live sessions this worker keeps a while."""

    def __init__(
        self,
        registry: ToolRegistry,
        checkpoints: CheckpointStore,
        *,
        runtimes: Mapping[str, CodeRuntime] | None = None,
        session_queue: str | None = None,
        keep_alive_seconds: float = 60.0,
        snapshot_cache_size: int = 64,
        snapshot_cache_bytes: int = 256 * 1024 * 1024,
        session_keep_alive_seconds: float = 900.0,
    ) -> None:
        self.registry = registry
        self.checkpoints = checkpoints
        self._runtimes: dict[str, CodeRuntime] = dict(runtimes or {})
        self.session_queue = session_queue
        self.keep_alive_seconds = keep_alive_seconds
        self._sessions: dict[str, _LiveSession] = {}
        #: Checkpointed executions kept live after their step, keyed by execution and
        #: checkpoint hash: the next step on this worker skips the load and restore when it
        #: is handed the very same checkpoint. Purely a cache: the stored checkpoint stays
        #: the durable truth. A miss costs a load, a hash check and a restore in a fresh
        #: sandbox process (about 10% of a worker's CPU per tool call with 50 executions
        #: running, issue 11), so the cache holds as many executions as run at once, up to
        #: ``snapshot_cache_size`` and ``snapshot_cache_bytes`` of their checkpoints.
        self.snapshot_cache_size = snapshot_cache_size
        self.snapshot_cache_bytes = snapshot_cache_bytes
        self._snapshots: OrderedDict[str, _LiveSession] = OrderedDict()
        #: Deferred runs the cache let go, dumped to the store (not referenced by any history:
        #: a cache spill, deleted by the step that restores it, else by the retention sweep),
        #: so the next step here restores them instead of leaving a rebuild to the workflow.
        self._spilled: OrderedDict[str, asyncio.Future[tuple[CheckpointRef, _LiveSession] | None]] = OrderedDict()
        self._background: set[asyncio.Task[Any]] = set()
        #: Small checkpoints recorded history has moved past, deleted together a moment later
        #: (one thread hop or one DeleteObjects request for many steps, not one per step).
        self._doomed: list[tuple[CheckpointScope, CheckpointRef]] = []
        self._reaper: asyncio.TimerHandle | None = None
        #: Sessions between cells (``workflows/session_workflow.py``). A runtime that cannot dump a
        #: session (python) keeps it live here for ``session_keep_alive_seconds`` after its
        #: last cell; its next cell comes to this worker's queue, and anywhere else (or later)
        #: the session is rebuilt by replaying its cells. A session whose state was saved
        #: (monty) stays warm here too, purely as a cache in front of that state.
        self.session_keep_alive_seconds = session_keep_alive_seconds
        self._kept_sessions: dict[str, _KeptSession] = {}
        self._warm_sessions: OrderedDict[str, CodeSession] = OrderedDict()

    # -- plumbing ---------------------------------------------------------------------

    def runtime(self, name: str) -> CodeRuntime:
        if name not in self._runtimes:
            self._runtimes[name] = get_runtime(name)
        return self._runtimes[name]

    async def aclose(self) -> None:
        for sid in list(self._sessions):
            await self._drop(sid)
        for key in list(self._kept_sessions):
            await self._drop_kept(key)
        while self._warm_sessions:
            _, warm = self._warm_sessions.popitem()
            await warm.close()
        while self._snapshots:
            _, live = self._snapshots.popitem()
            await live.execution.close()
        spills, self._spilled = list(self._spilled.values()), OrderedDict()
        await asyncio.gather(*spills, return_exceptions=True)  # each closes its sandbox
        self._reap()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for rt in self._runtimes.values():
            await rt.aclose()

    async def _drop(self, session_id: str) -> None:
        live = self._sessions.pop(session_id, None)
        if live is not None:
            if live.expiry is not None:
                live.expiry.cancel()
            await live.execution.close()

    def _keep(self, live: _LiveSession) -> str:
        sid = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        live.expiry = loop.call_later(self.keep_alive_seconds, lambda: self._in_background(self._drop(sid)))
        self._sessions[sid] = live
        return sid

    def _in_background(self, coro: Any) -> None:
        """Work off the step's critical path (closing a sandbox, deleting an old checkpoint)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _close_later(self, execution: CodeExecution) -> None:
        self._in_background(execution.close())

    def _cache_snapshot(self, runtime: str, key: str, live: _LiveSession) -> None:
        # A cached execution holds one of the runtime's sandbox processes: keep at least
        # two of them free so cached runs can never starve new steps.
        capacity = getattr(self._runtimes.get(runtime), "max_processes", None)
        limit = self.snapshot_cache_size if capacity is None else min(self.snapshot_cache_size, capacity - 2)
        if limit <= 0:
            self._close_later(live.execution)
            return
        self._snapshots[key] = live
        held = sum(entry.size for entry in self._snapshots.values())
        while len(self._snapshots) > limit or (held > self.snapshot_cache_bytes and len(self._snapshots) > 1):
            old_key, old = self._snapshots.popitem(last=False)
            held -= old.size
            if old.scope is None:
                self._close_later(old.execution)
                continue
            spill = asyncio.get_running_loop().create_task(self._spill(old))
            self._spilled[old_key] = spill
            while len(self._spilled) > SPILLS_KEPT:
                _, forgotten = self._spilled.popitem(last=False)
                forgotten.cancel()

    async def _spill(self, live: _LiveSession) -> tuple[CheckpointRef, _LiveSession] | None:
        """Dump an evicted deferred run to the store (then close it): the ref, or None."""
        assert live.scope is not None
        try:
            blob = await live.execution.checkpoint()
            return None if blob is None else (await self.checkpoints.save(live.scope, blob), live)
        except Exception as err:  # the workflow still holds what rebuilds it
            log.info("could not spill an evicted live run: %s", err)
            return None
        finally:
            await live.execution.close()

    async def _take_spill(self, key: str) -> tuple[CheckpointRef, _LiveSession] | None:
        """The spill of the deferred run evicted under ``key`` (now no longer remembered)."""
        spill = self._spilled.pop(key, None)
        if spill is None:
            return None
        try:
            return await spill
        except asyncio.CancelledError:
            return None

    async def _unspill(self, key: str) -> tuple[CodeExecution, _LiveSession] | None:
        """The deferred run spilled under ``key``, restored (its spill deleted), or None."""
        spilled = await self._take_spill(key)
        if spilled is None:
            return None
        ref, live = spilled
        assert live.scope is not None
        try:
            blob = await self.checkpoints.load(live.scope, ref)
            self._delete_later(live.scope, ref)
            execution = await self.runtime(live.execution.runtime).restore(blob)
        except (CheckpointUnusable, SandboxError) as err:
            log.info("could not restore a spilled live run: %s", err)
            return None
        return (execution, live) if execution is not None else None

    async def sweep_orphans(self) -> list[str]:
        """Remove the sandboxes crashed workers left on a shared engine (the docker runtime's
        labelled containers that no run can use any more). Only for runtimes this worker can
        build without being asked: docker when ``CODEMODE_DOCKER_IMAGE`` names its image."""
        if "docker" not in self._runtimes and not os.environ.get("CODEMODE_DOCKER_IMAGE"):
            return []
        try:
            runtime = self.runtime("docker")
            return list(await runtime.sweep())  # type: ignore[attr-defined]
        except Exception as err:  # an engine that is down is the steps' problem, not the worker's
            log.warning("could not sweep orphaned docker containers: %s", err)
            return []

    @property
    def live_sessions(self) -> int:
        """Sandboxes held live for runtimes without checkpoints (a parked run holds none)."""
        return len(self._sessions)

    def activities(self) -> list[Any]:
        return [
            self.start,
            self.resume,
            self.release,
            self.save_state,
            self.load_state,
            self.release_session,
            self.save_recipe,
        ]

    @property
    def kept_sessions(self) -> int:
        """Sessions this worker keeps live between cells (python)."""
        return len(self._kept_sessions)

    # -- activities ---------------------------------------------------------------------

    @activity.defn(name=names.SANDBOX_START)
    async def start(self, inp: StartInput) -> StepResult:
        async with _heartbeating():
            return await self._start(inp)

    @activity.defn(name=names.SANDBOX_RESUME)
    async def resume(self, inp: ResumeInput) -> StepResult:
        async with _heartbeating():
            return await self._resume_and_release(inp)

    async def step_after_tool(
        self, then: NextStep, execution_id: str, answer: JournalEntry, spent: int = 0
    ) -> StepResult:
        """The resume step a tool activity runs after its call (``ToolInput.then``), bounded
        by ``then.step_timeout``. Any failure comes back as an exception for the tool
        activity to report in-band: the tool's result is final either way. ``spent``: the
        JSON bytes of the call's arguments and result (what deferring its checkpoint adds to
        the journal tail the workflow holds)."""
        return await asyncio.wait_for(
            self._resume_and_release(
                then.resume_input(execution_id, answer),
                defer=(then.defer_bytes - spent, spent) if then.defer_bytes > 0 else None,
            ),
            then.step_timeout,
        )

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
            self._delete_later(_scope(inp.execution_id, inp.first_run_id), inp.checkpoint)
            step.released = True
        return step

    @activity.defn(name=names.SANDBOX_RELEASE)
    async def release(self, inp: ReleaseInput) -> None:
        """Drop this worker's live handle on the execution; then pause (``suspend``) or free
        (``discard``) what its checkpoint names. Discard also deletes the last checkpoint."""
        if inp.session_id:
            await self._drop(inp.session_id)
        scope = _scope(inp.execution_id, inp.first_run_id)
        if inp.live:  # a deferred run: held here, or spilled to the store
            key = _live_key(inp.execution_id, inp.live)
            held = self._snapshots.pop(key, None)
            if held is not None:
                await held.execution.close()
            spilled = await self._take_spill(key)
            if spilled is not None:
                await self._delete_quietly(scope, spilled[0])
        if inp.checkpoint is None:
            return
        live = self._snapshots.pop(_cache_key(inp.execution_id, inp.checkpoint), None)
        if live is not None:
            await live.execution.close()
        if inp.mode == "discard" and inp.superseded is not None and inp.superseded != inp.checkpoint:
            await self._delete_quietly(scope, inp.superseded)
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

    @activity.defn(name=names.SANDBOX_SAVE_STATE)
    async def save_state(self, inp: SaveStateInput) -> SegmentRef:
        """Store a segment of a long execution's state (journal and call records) before it
        continues as new: the next run carries only the reference."""
        blob = inp.segment.model_dump_json().encode()
        ref = await self.checkpoints.save(_scope(inp.execution_id, inp.first_run_id), blob, kind="seg")
        return SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(inp.segment.calls))

    @activity.defn(name=names.SANDBOX_LOAD_STATE)
    async def load_state(self, inp: LoadStateInput) -> StateSegment:
        """The stored segments, joined (their hashes verified)."""
        return await self._load_segments(_scope(inp.execution_id, inp.first_run_id), inp.segments)

    async def _load_segments(self, scope: CheckpointScope, refs: list[SegmentRef]) -> StateSegment:
        whole = StateSegment()
        for ref in refs:
            try:
                part = StateSegment.model_validate_json(await self.checkpoints.load(scope, ref, kind="seg"))
            except CheckpointUnusable as err:  # unlike a checkpoint, the journal has no fallback
                raise ApplicationError(f"the execution's stored state is unusable: {err}", type="StateLost") from err
            whole.journal.extend(part.journal)
            whole.calls.extend(part.calls)
        return whole

    async def _start(self, inp: StartInput) -> StepResult:
        try:
            specs = self.registry.select(inp.tools)
            runtime = self.runtime(inp.runtime)
        except (KeyError, ValueError, ImportError) as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            return StepResult(
                kind="error", error=ErrorInfo(type="ValueError", message=str(msg), kind="input"), via="started"
            )
        if inp.cell is not None:
            return await self._start_cell(runtime, specs, inp)
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await runtime.execute(
                inp.code,
                functions=sigs,
                inputs=inp.inputs,
                limits=inp.limits,
                determinism=inp.determinism,
                options=inp.options,
            )
        except CodeExecutionError as err:
            return StepResult(kind="error", error=error_info(err), via="started")
        except SandboxError as err:
            raise ApplicationError(f"the {inp.runtime} sandbox failed to start: {err}", type="SandboxError") from err
        scope = _scope(inp.execution_id, inp.first_run_id)
        defer = (inp.defer_bytes, 0) if inp.defer_bytes > 0 else None
        return await self._drive(execution, specs, scope, stdout_offset=0, via="started", defer=defer)

    async def _resume(self, inp: ResumeInput, defer: tuple[int, int] | None = None) -> StepResult:
        began = time.perf_counter()
        runtime = self.runtime(inp.runtime)
        scope = _scope(inp.execution_id, inp.first_run_id)
        if inp.superseded is not None and inp.superseded != inp.checkpoint:
            self._delete_later(scope, inp.superseded)
        execution: CodeExecution | None = None
        specs: dict[str, ToolSpec] | None = None
        via: Via = "live"
        stdout_offset = inp.stdout_offset
        refused: str | None = inp.replay_reason
        unsaved_s = 0.0
        size = 0
        #: Journal entries to answer from before this step's answers (a rebuilt live run).
        tail: list[JournalEntry] | None = None
        key = _live_key(inp.execution_id, inp.live) if inp.live else None
        held = self._snapshots.pop(key, None) if key else None
        if held is not None:
            execution, specs, stdout_offset = held.execution, held.specs, held.stdout_offset
            unsaved_s, size = held.unsaved_s, held.size
        elif key and (unspilled := await self._unspill(key)) is not None:
            execution, spilled = unspilled
            specs, stdout_offset, unsaved_s, size = spilled.specs, 0, spilled.unsaved_s, spilled.size
            via = "restored"
        elif inp.live and (len(inp.tail) < inp.tail_entries or (inp.checkpoint is None and inp.start is None)):
            # The run went on past its checkpoint on another worker (or this one restarted):
            # only the workflow holds the journal entries to rebuild it from.
            raise ApplicationError(
                "the live run is not on this worker; rebuild it from the journal", type=CHECKPOINT_REFUSED, non_retryable=True
            )
        elif inp.session_id:
            live = self._sessions.pop(inp.session_id, None)
            if live is not None:
                if live.expiry is not None:
                    live.expiry.cancel()
                execution, specs, stdout_offset = live.execution, live.specs, live.stdout_offset
            else:
                refused = refused or "the live sandbox is gone (its worker restarted or its keep-alive expired)"
        elif inp.checkpoint is not None:
            if inp.live:
                tail, unsaved_s = inp.tail, float("inf")  # rebuilt: save a checkpoint this time
            cached = self._snapshots.pop(_cache_key(inp.execution_id, inp.checkpoint), None)
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
            specs = self.registry.select(inp.tools)
        first: list[FunctionCall] | ExecutionResult | None = None
        ratchet = _Ratchet(execution, specs)
        try:
            if tail:
                first = await _replay_from_checkpoint(execution, [*tail, *inp.answers], ratchet)
            else:
                for ans in inp.answers:
                    await _answer(execution, ans, ratchet)
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
            await self._drive(
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
        specs = self.registry.select(inp.start.tools)
        sigs = {n: s.signature for n, s in specs.items()}
        cell: CellRef | None = None
        try:
            if inp.start.cell is not None:  # a cell: its session as it was, then the cell again
                session, _, why = await self._open_session(runtime, inp.start, use_live=False)
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
            journal = (await self._load_segments(scope, inp.journal_segments)).journal + journal
        ratchet = _Ratchet(execution, specs)
        try:
            first = await replay(execution, journal, before_answer=ratchet.before)
        except CodeExecutionError as err:
            await execution.close()
            end = await self._end_cell(execution, cell, error_info(err)) if cell is not None else None
            return StepResult(
                kind="error", error=error_info(err), via="replayed", fallback=reason, network_cut=ratchet.cut, cell=end
            )
        except BaseException:
            await execution.close()
            raise
        return ratchet.noted(
            await self._drive(
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

    def _delete_later(self, scope: CheckpointScope, ref: CheckpointRef) -> None:
        """Delete a checkpoint off the step's critical path: a large one now, small ones in
        batches every ``DELETE_BATCH_SECONDS`` (so a run holds two large checkpoints at most,
        and for an instant a third small one)."""
        if ref.size > DELETE_BATCH_MAX_BYTES:
            self._in_background(self._delete_quietly(scope, ref))
            return
        self._doomed.append((scope, ref))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().call_later(DELETE_BATCH_SECONDS, self._reap)

    def _reap(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        doomed, self._doomed = self._doomed, []
        if doomed:
            self._in_background(self._delete_batch(doomed))

    async def _delete_batch(self, doomed: list[tuple[CheckpointScope, CheckpointRef]]) -> None:
        try:
            await self.checkpoints.delete_many(doomed)
        except Exception as err:  # leftovers are swept at retention; never fail a step for them
            log.warning("could not delete %d superseded checkpoints: %s", len(doomed), err)

    async def _delete_quietly(self, scope: CheckpointScope, ref: CheckpointRef) -> None:
        try:
            await self.checkpoints.delete(scope, ref)
        except Exception as err:  # a leftover is swept at retention; never fail a step for it
            log.warning("could not delete superseded checkpoint %s: %s", ref.sha256[:12], err)

    # -- sessions (cells that share a namespace) ------------------------------------------

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
        scope = _scope(inp.execution_id, inp.first_run_id)
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
        scope = _session_scope(cell.scope)
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
        return session, "replayed", reason or "nothing else holds the session"

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
                specs = self.registry.select(entry.tools)
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
        scope = _session_scope(cell.scope)
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
        if runtime.capabilities.checkpoint_tier is CheckpointTier.SESSION:
            try:
                await runtime.suspend(blob)  # paused between cells: no compute while idle
            except SandboxError as err:
                log.warning("could not pause the session's sandbox: %s", err)
            await session.close()  # detaches; the sandbox is its state
        else:
            self._keep_warm(_warm_key(scope, ref, session.tag), session)
        return CellEnd(effect=effect, state=ref, variables=variables)

    def _keep_session(self, session: CodeSession, owner: str) -> str:
        key = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(self.session_keep_alive_seconds, lambda: self._in_background(self._drop_kept(key)))
        self._kept_sessions[key] = _KeptSession(session, expiry, owner)
        return key

    def kept_session_owners(self) -> list[tuple[str, str]]:
        """(session workflow id, key) of every session kept live here."""
        return [(kept.owner, key) for key, kept in self._kept_sessions.items() if kept.owner]

    async def _drop_kept(self, key: str) -> None:
        kept = self._kept_sessions.pop(key, None)
        if kept is not None:
            if kept.expiry is not None:
                kept.expiry.cancel()
            await kept.session.close()

    def _keep_warm(self, key: str, session: CodeSession) -> None:
        capacity = getattr(self._runtimes.get(session.runtime), "max_processes", None)
        limit = WARM_SESSIONS if capacity is None else min(WARM_SESSIONS, max(capacity // 4, 0))
        if limit <= 0:
            self._in_background(session.close())
            return
        self._warm_sessions[key] = session
        while len(self._warm_sessions) > limit:
            _, old = self._warm_sessions.popitem(last=False)
            self._in_background(old.close())

    @activity.defn(name=names.SESSION_SAVE_RECIPE)
    async def save_recipe(self, inp: SessionRecipeInput) -> SessionRecipeRefs:
        """Store the recipe of a session's latest cells (the workflow then carries a reference
        instead). Past ``RECIPE_SEGMENTS`` segments they are merged into one, so what a cell's
        start carries stays bounded however long the session."""
        scope = _session_scope(inp.scope)
        if len(inp.segments) + 1 <= RECIPE_SEGMENTS:
            ref = await self.checkpoints.save(scope, inp.recipe.model_dump_json().encode(), kind="seg")
            added = SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(inp.recipe.cells))
            return SessionRecipeRefs(segments=[*inp.segments, added])
        cells: list[CellRecipe] = []
        for old in inp.segments:
            cells.extend(SessionRecipe.model_validate_json(await self._load_blob(scope, old)).cells)
        merged = SessionRecipe(cells=[*cells, *inp.recipe.cells])
        ref = await self.checkpoints.save(scope, merged.model_dump_json().encode(), kind="seg")
        if ref not in inp.segments:  # (a retry after the deletes finds them gone: no matter)
            with contextlib.suppress(Exception):
                await self.checkpoints.delete(scope, *inp.segments, kind="seg")
        return SessionRecipeRefs(segments=[SegmentRef(sha256=ref.sha256, size=ref.size, calls=len(merged.cells))])

    @activity.defn(name=names.SESSION_RELEASE)
    async def release_session(self, inp: SessionReleaseInput) -> None:
        """Let go of a session's state: drop the live process or warm copy held here, free a
        sandbox the state names (e2b: kill it), delete the state; with ``everything``, delete
        all the session stored (it is closing)."""
        scope = _session_scope(inp.scope)
        if inp.live:
            await self._drop_kept(inp.live)
        for key in [k for k in self._warm_sessions if k.startswith(scope.root)]:
            await self._warm_sessions.pop(key).close()
        if inp.state is not None:
            try:
                blob = await self.checkpoints.load(scope, inp.state)
                await self.runtime(inp.runtime).discard(blob)
            except CheckpointUnusable:
                pass
            except SandboxError as err:
                log.warning("could not free the session's sandbox: %s", err)
            await self._delete_quietly(scope, inp.state)
        if inp.everything:
            deleted = await self.checkpoints.store.delete_prefix(bucket=self.checkpoints.bucket, prefix=scope.root)
            log.info("session %s closed: %d stored objects deleted", inp.scope.session_id, deleted)

    # -- the step loop --------------------------------------------------------------------

    async def _drive(
        self,
        execution: CodeExecution,
        specs: dict[str, ToolSpec],
        scope: CheckpointScope,
        *,
        stdout_offset: int,
        via: Via,
        first: list[FunctionCall] | ExecutionResult | None = None,
        fallback: str | None = None,
        defer: tuple[int, int] | None = None,
        unsaved_s: float = 0.0,
        size: int = 0,
        cell: CellRef | None = None,
    ) -> StepResult:
        """Run to the next batch of valid calls (answering invalid ones in place) or the end.
        ``cell``: the execution is a cell of a session, which its end saves (``_end_cell``).

        ``defer``: (bytes the step may add to the unsaved journal tail, bytes its answers
        already add). A step that may, that waits for exactly one call and has run for less
        than ``DEFER_SECONDS`` since the last saved checkpoint saves none: it keeps the run
        live on this worker (``StepResult.live``), and the next call's activity continues it
        here (issue 11: the dump and the store write were the largest per-call cost left).
        Anywhere else the run is rebuilt from the checkpoint before plus the journal entries
        since, which the workflow holds: no tool runs again, at most that much compute does."""
        began = time.perf_counter()
        rejected: list[JournalEntry] = []
        try:
            while True:
                event = first if first is not None else await execution.next_batch()
                first = None
                if isinstance(event, ExecutionResult):
                    self._close_later(execution)
                    too_big = _oversize("the code's output", event.output)
                    if too_big is not None:
                        oversize = ErrorInfo(type="ValueError", message=too_big, kind="resource")
                        return StepResult(
                            kind="error",
                            error=oversize,
                            rejected=rejected,
                            stdout=event.stdout[stdout_offset:],
                            via=via,
                            fallback=fallback,
                            cell=await self._end_cell(execution, cell, oversize) if cell is not None else None,
                        )
                    return StepResult(
                        kind="result",
                        result=event,
                        rejected=rejected,
                        stdout=event.stdout[stdout_offset:],
                        stdout_truncated=event.stdout_truncated,
                        via=via,
                        fallback=fallback,
                        cell=await self._end_cell(execution, cell, None) if cell is not None else None,
                    )
                calls: list[CallRequest] = []
                for call in event:
                    spec = specs.get(call.function_name)
                    try:
                        if spec is None:
                            raise NameError(f"name '{call.function_name}' is not defined")
                        spec.validate(call.args, call.kwargs)
                        too_big = _oversize(f"the arguments of {call.function_name}()", [call.args, call.kwargs], "are")
                        if too_big is not None:
                            raise ValueError(too_big)
                    except (TypeError, ValueError, NameError) as err:
                        entry = JournalEntry.raised(call, type(err).__name__, clip(str(err)))
                        rejected.append(entry)
                        await _answer(execution, entry)
                        continue
                    calls.append(_call_request(call, spec))
                if not calls:
                    continue
                stdout = execution.stdout
                step = StepResult(
                    kind="calls",
                    calls=calls,
                    rejected=rejected,
                    stdout=stdout[stdout_offset:],
                    via=via,
                    fallback=fallback,
                )
                runtime = self.runtime(execution.runtime)
                if defer is not None and len(calls) == 1 and not calls[0].requires_approval:
                    added = defer[1] + sum(len(to_json(e)) for e in rejected)
                    ran = unsaved_s + (time.perf_counter() - began)
                    if (
                        added <= defer[0]
                        and ran <= DEFER_SECONDS
                        and runtime.capabilities.checkpoint_tier is CheckpointTier.SNAPSHOT
                    ):
                        step.live, step.deferred = uuid.uuid4().hex[:16], max(added, 1)
                        self._cache_snapshot(
                            execution.runtime,
                            _live_key(scope.execution_id, step.live),
                            _LiveSession(execution, specs, len(stdout), size=size, unsaved_s=ran, scope=scope),
                        )
                        return step
                checkpoint = await execution.checkpoint()
                if checkpoint is not None:
                    step.checkpoint = await self.checkpoints.save(scope, checkpoint)
                    step.holds_compute = runtime.capabilities.checkpoint_tier == CheckpointTier.SESSION
                    self._cache_snapshot(
                        execution.runtime,
                        _cache_key(scope.execution_id, step.checkpoint),
                        _LiveSession(execution, specs, len(stdout), size=step.checkpoint.size),
                    )
                else:
                    step.session_id = self._keep(_LiveSession(execution, specs, len(stdout)))
                    step.session_queue = self.session_queue
                return step
        except CodeExecutionError as err:
            stdout = execution.stdout
            await execution.close()
            return StepResult(
                kind="error",
                error=error_info(err),
                rejected=rejected,
                stdout=stdout[stdout_offset:],
                via=via,
                fallback=fallback,
                cell=await self._end_cell(execution, cell, error_info(err)) if cell is not None else None,
            )
        except SandboxError as err:
            await execution.close()
            if execution.session is not None:
                await execution.session.close()
            raise ApplicationError(f"the sandbox failed: {err}", type="SandboxError") from err
        except BaseException:
            await execution.close()
            raise


#: A step may leave its checkpoint unsaved while the steps since the last saved one have run
#: for less than this (wall seconds): what a rebuild on another worker would redo.
DEFER_SECONDS = 0.05
#: Sessions kept warm after their cell (their state saved): at most this many, and a quarter
#: of the runtime's processes.
WARM_SESSIONS = 16
#: Stored segments of a session's recipe before they are merged into one.
RECIPE_SEGMENTS = 8
#: Evicted deferred runs whose spill this worker remembers (older ones are rebuilt instead).
SPILLS_KEPT = 4096
#: Small superseded checkpoints are deleted in batches this often (see ``_delete_later``).
DELETE_BATCH_SECONDS = 0.05
DELETE_BATCH_MAX_BYTES = 64 * 1024


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


def _scope(execution_id: str, first_run_id: str) -> CheckpointScope:
    namespace = activity.info().workflow_namespace if activity.in_activity() else "default"
    return CheckpointScope(namespace=namespace, execution_id=execution_id, first_run_id=first_run_id)


def _session_scope(scope: SessionScope) -> CheckpointScope:
    namespace = activity.info().workflow_namespace if activity.in_activity() else "default"
    return CheckpointScope(namespace=namespace, execution_id=scope.session_id, first_run_id=scope.first_run_id)


def _session_tag(start: StartInput) -> str:
    """What a live session was opened with: limits, sandbox options, seed and clock."""
    import hashlib

    parts = [start.limits.model_dump_json(), start.options.model_dump_json() if start.options else ""]
    parts.append(start.determinism.model_dump_json() if start.determinism else "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _warm_key(scope: CheckpointScope, ref: CheckpointRef, tag: str | None) -> str:
    return f"{scope.root}{ref.sha256}:{tag}"


def _cache_key(execution_id: str, ref: CheckpointRef) -> str:
    return f"{execution_id}:{ref.sha256}"


def _live_key(execution_id: str, live: str) -> str:
    return f"{execution_id}~{live}"


async def _replay_from_checkpoint(
    execution: CodeExecution, journal: list[JournalEntry], ratchet: _Ratchet
) -> list[FunctionCall] | ExecutionResult:
    """Bring a run restored at its checkpoint (paused at that step's calls) up to date: answer
    those calls and replay the rest of ``journal``; the first event beyond it."""
    waiting = {c.call_id for c in execution.pending_calls}
    rest: list[JournalEntry] = []
    for entry in journal:
        if entry.call_id in waiting:
            await _answer(execution, entry, ratchet)
        else:
            rest.append(entry)
    return await replay(execution, rest, before_answer=ratchet.before)


def _oversize(what: str, value: Any, verb: str = "is") -> str | None:
    """The error message when ``value`` is over the per-value cap, else None."""
    try:
        size = len(to_json(value, fallback=repr))
    except Exception:  # unserialisable: let the normal path report it
        return None
    if size <= MAX_VALUE_BYTES:
        return None
    return f"{what} {verb} {human_bytes(size)}, over the {human_bytes(MAX_VALUE_BYTES)} limit for one value"


def _call_request(call: FunctionCall, spec: ToolSpec) -> CallRequest:
    opts = spec.options
    return CallRequest(
        call_id=call.call_id,
        tool=call.function_name,
        args=call.args,
        kwargs=call.kwargs,
        summary=spec.summarize(call.args, call.kwargs),
        line=call.line,
        requires_approval=opts.requires_approval,
        max_attempts=opts.max_attempts,
        timeout_seconds=opts.timeout.total_seconds(),
        private_data=opts.private_data,
    )


class _Ratchet:
    """Seed 001's network ratchet, as one step sees it: before the code gets the outcome of a
    tool marked ``private_data``, the execution's network is cut for good (a no-op unless the
    execution runs with ``network="ratchet"`` and still has its network). Any outcome counts,
    an error too: its message may carry the data. A failure to cut fails the step, the answer
    undelivered."""

    def __init__(self, execution: CodeExecution, specs: Mapping[str, ToolSpec]) -> None:
        self.execution = execution
        self.specs = specs
        #: Why this step cut the network (None: it did not).
        self.cut: str | None = None

    async def before(self, entry: JournalEntry) -> None:
        spec = self.specs.get(entry.function_name)
        if spec is None or not spec.options.private_data:
            return
        reason = f"{entry.function_name}() returned private data (call {entry.call_id})"
        if await self.execution.cut_network(reason):
            self.cut = self.cut or reason

    def noted(self, step: StepResult) -> StepResult:
        step.network_cut = step.network_cut or self.cut
        return step


async def _answer(execution: CodeExecution, entry: JournalEntry, ratchet: _Ratchet | None = None) -> None:
    if ratchet is not None:
        await ratchet.before(entry)
    if entry.error_type is None:
        await execution.provide_result(entry.result, call_id=entry.call_id)
    else:
        await execution.provide_error(entry.error_type, entry.error_message, call_id=entry.call_id)
