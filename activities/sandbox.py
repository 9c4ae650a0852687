"""Sandbox steps as activities: start (type-check, run to the first calls) and resume
(continue from a live session, a checkpoint, or by journal replay; answer; run on).

A step is idempotent under retry: for Monty it is a pure function of (checkpoint, answers),
so any worker can run any step. Runtimes that cannot checkpoint keep their process live on
the worker that ran the step (a keep-alive window), advertise that worker's own task queue,
and are rebuilt by journal replay anywhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from runtimes import CodeExecution, CodeExecutionError, CodeRuntime, ExecutionResult, FunctionCall, get_runtime
from runtimes.errors import SandboxError
from runtimes.replay import JournalEntry, replay
from workflows.models import ErrorInfo

from .models import CHECKPOINT_REFUSED, CallRequest, ResumeInput, StartInput, StepResult, Via
from .tools import ToolRegistry, ToolSpec

log = logging.getLogger(__name__)


def error_info(err: CodeExecutionError) -> ErrorInfo:
    return ErrorInfo(
        type=err.error_type,
        message=err.message,
        kind=err.kind,
        line=err.line,
        traceback=err.traceback,
    )


@dataclass
class _LiveSession:
    execution: CodeExecution
    specs: dict[str, ToolSpec]
    stdout_offset: int
    expiry: asyncio.TimerHandle | None = None


class SandboxActivities:
    """The step activities of one worker. Holds the runtimes (one pool each) and, for
    runtimes without checkpoints, the live sessions this worker keeps for a while."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        runtimes: Mapping[str, CodeRuntime] | None = None,
        session_queue: str | None = None,
        keep_alive_seconds: float = 60.0,
        snapshot_cache_size: int = 4,
    ) -> None:
        self.registry = registry
        self._runtimes: dict[str, CodeRuntime] = dict(runtimes or {})
        self.session_queue = session_queue
        self.keep_alive_seconds = keep_alive_seconds
        self._sessions: dict[str, _LiveSession] = {}
        #: Checkpointed executions kept live after their step, keyed by the checkpoint's hash:
        #: the next step on this worker skips the restore when it is handed the very same
        #: checkpoint. Purely a cache: the checkpoint stays the durable truth.
        self.snapshot_cache_size = snapshot_cache_size
        self._snapshots: OrderedDict[str, _LiveSession] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    # -- plumbing ---------------------------------------------------------------------

    def runtime(self, name: str) -> CodeRuntime:
        if name not in self._runtimes:
            self._runtimes[name] = get_runtime(name)
        return self._runtimes[name]

    async def aclose(self) -> None:
        for sid in list(self._sessions):
            await self._drop(sid)
        while self._snapshots:
            _, live = self._snapshots.popitem()
            await live.execution.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
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
        live.expiry = loop.call_later(self.keep_alive_seconds, lambda: asyncio.ensure_future(self._drop(sid)))
        self._sessions[sid] = live
        return sid

    def _close_later(self, execution: CodeExecution) -> None:
        """Release a sandbox off the step's critical path."""
        task = asyncio.get_running_loop().create_task(execution.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _cache_snapshot(self, runtime: str, key: str, live: _LiveSession) -> None:
        # A cached execution holds one of the runtime's sandbox processes: keep at least
        # two of them free so cached runs can never starve new steps.
        capacity = getattr(self._runtimes.get(runtime), "max_processes", None)
        limit = self.snapshot_cache_size if capacity is None else min(self.snapshot_cache_size, capacity - 2)
        if limit <= 0:
            self._close_later(live.execution)
            return
        self._snapshots[key] = live
        while len(self._snapshots) > limit:
            _, old = self._snapshots.popitem(last=False)
            self._close_later(old.execution)

    @property
    def live_sessions(self) -> int:
        """Sandboxes held live for runtimes without checkpoints (a parked run holds none)."""
        return len(self._sessions)

    def activities(self) -> list[Any]:
        return [self.start, self.resume]

    # -- activities ---------------------------------------------------------------------

    @activity.defn(name="sandbox_start")
    async def start(self, inp: StartInput) -> StepResult:
        async with _heartbeating():
            return await self._start(inp)

    @activity.defn(name="sandbox_resume")
    async def resume(self, inp: ResumeInput) -> StepResult:
        async with _heartbeating():
            return await self._resume(inp)

    async def _start(self, inp: StartInput) -> StepResult:
        try:
            specs = self.registry.select(inp.tools)
            runtime = self.runtime(inp.runtime)
        except (KeyError, ValueError, ImportError) as err:
            msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
            return StepResult(kind="error", error=ErrorInfo(type="ValueError", message=str(msg), kind="input"))
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await runtime.execute(inp.code, functions=sigs, inputs=inp.inputs, limits=inp.limits)
        except CodeExecutionError as err:
            return StepResult(kind="error", error=error_info(err))
        except SandboxError as err:
            raise ApplicationError(f"the {inp.runtime} sandbox failed to start: {err}", type="SandboxError") from err
        return await self._drive(execution, specs, stdout_offset=0, via="started", execution_id=inp.execution_id)

    async def _resume(self, inp: ResumeInput) -> StepResult:
        runtime = self.runtime(inp.runtime)
        execution: CodeExecution | None = None
        specs: dict[str, ToolSpec] | None = None
        via: Via = "live"
        stdout_offset = inp.stdout_offset
        if inp.session_id and inp.session_id in self._sessions:
            live = self._sessions.pop(inp.session_id)
            if live.expiry is not None:
                live.expiry.cancel()
            execution, specs, stdout_offset = live.execution, live.specs, live.stdout_offset
        elif inp.checkpoint is not None:
            cached = self._snapshots.pop(_checkpoint_key(inp.execution_id, inp.checkpoint), None)
            if cached is not None:
                execution, specs, stdout_offset = cached.execution, cached.specs, cached.stdout_offset
            else:
                execution = await runtime.restore(inp.checkpoint)
                via = "restored"
                stdout_offset = 0  # a restored handle prints only what comes after the checkpoint
        if execution is None and inp.start is not None:
            return await self._replay(runtime, inp)
        if execution is None:
            raise ApplicationError(
                "the checkpoint was refused (another runtime version?) and no journal was given to replay",
                type=CHECKPOINT_REFUSED,
                non_retryable=True,
            )
        if specs is None:
            specs = self.registry.select(inp.tools)
        try:
            for ans in inp.answers:
                await _answer(execution, ans)
        except CodeExecutionError as err:
            await execution.close()
            return StepResult(kind="error", error=error_info(err), via=via)
        return await self._drive(
            execution, specs, stdout_offset=stdout_offset, via=via, execution_id=inp.execution_id
        )

    async def _replay(self, runtime: CodeRuntime, inp: ResumeInput) -> StepResult:
        assert inp.start is not None
        specs = self.registry.select(inp.start.tools)
        sigs = {n: s.signature for n, s in specs.items()}
        try:
            execution = await runtime.execute(
                inp.start.code, functions=sigs, inputs=inp.start.inputs, limits=inp.start.limits
            )
        except CodeExecutionError as err:
            return StepResult(kind="error", error=error_info(err), via="replayed")
        try:
            first = await replay(execution, inp.journal)
        except CodeExecutionError as err:
            await execution.close()
            return StepResult(kind="error", error=error_info(err), via="replayed")
        return await self._drive(
            execution,
            specs,
            stdout_offset=inp.stdout_offset,
            via="replayed",
            first=first,
            execution_id=inp.execution_id,
        )

    # -- the step loop --------------------------------------------------------------------

    async def _drive(
        self,
        execution: CodeExecution,
        specs: dict[str, ToolSpec],
        *,
        stdout_offset: int,
        via: Via,
        first: list[FunctionCall] | ExecutionResult | None = None,
        execution_id: str = "",
    ) -> StepResult:
        """Run to the next batch of valid calls (answering invalid ones in place) or the end."""
        rejected: list[JournalEntry] = []
        try:
            while True:
                event = first if first is not None else await execution.next_batch()
                first = None
                if isinstance(event, ExecutionResult):
                    self._close_later(execution)
                    return StepResult(
                        kind="result",
                        result=event,
                        rejected=rejected,
                        stdout=event.stdout[stdout_offset:],
                        stdout_truncated=event.stdout_truncated,
                        via=via,
                    )
                calls: list[CallRequest] = []
                for call in event:
                    spec = specs.get(call.function_name)
                    try:
                        if spec is None:
                            raise NameError(f"name '{call.function_name}' is not defined")
                        spec.validate(call.args, call.kwargs)
                    except (TypeError, ValueError, NameError) as err:
                        entry = JournalEntry.raised(call, type(err).__name__, str(err))
                        rejected.append(entry)
                        await _answer(execution, entry)
                        continue
                    calls.append(_call_request(call, spec))
                if not calls:
                    continue
                stdout = execution.stdout
                step = StepResult(
                    kind="calls", calls=calls, rejected=rejected, stdout=stdout[stdout_offset:], via=via
                )
                checkpoint = execution.dump()
                if checkpoint is not None:
                    step.checkpoint = checkpoint
                    self._cache_snapshot(
                        execution.runtime, _checkpoint_key(execution_id, checkpoint), _LiveSession(execution, specs, len(stdout))
                    )
                else:
                    step.session_id = self._keep(_LiveSession(execution, specs, len(stdout)))
                    step.session_queue = self.session_queue
                return step
        except CodeExecutionError as err:
            stdout = execution.stdout
            await execution.close()
            return StepResult(
                kind="error", error=error_info(err), rejected=rejected, stdout=stdout[stdout_offset:], via=via
            )
        except SandboxError as err:
            await execution.close()
            raise ApplicationError(f"the sandbox failed: {err}", type="SandboxError") from err
        except BaseException:
            await execution.close()
            raise


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


def _checkpoint_key(execution_id: str, checkpoint: bytes) -> str:
    return execution_id + ":" + hashlib.blake2b(checkpoint, digest_size=16).hexdigest()


def _call_request(call: FunctionCall, spec: ToolSpec) -> CallRequest:
    opts = spec.options
    return CallRequest(
        call_id=call.call_id,
        tool=call.function_name,
        args=call.args,
        kwargs=call.kwargs,
        summary=spec.signature.format_call(call.args, call.kwargs),
        line=call.line,
        requires_approval=opts.requires_approval,
        max_attempts=opts.max_attempts,
        timeout_seconds=opts.timeout.total_seconds(),
        non_retryable=list(opts.non_retryable),
    )


async def _answer(execution: CodeExecution, entry: JournalEntry) -> None:
    if entry.error_type is None:
        await execution.provide_result(entry.result, call_id=entry.call_id)
    else:
        await execution.provide_error(entry.error_type, entry.error_message, call_id=entry.call_id)
