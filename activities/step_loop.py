"""The step loop (``SandboxActivities.steps``): run a sandbox to its next batch of
valid calls or its end (``_drive``), answer calls (``answer``, behind seed 001's network
``Ratchet``), and bring a restored run up to date by replaying the journal."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_json, to_jsonable_python
from temporalio.exceptions import ApplicationError

from codemode.runtimes import CodeExecution, CodeExecutionError, ExecutionResult, FunctionCall
from codemode.runtimes.artifacts import SAVE_ARTIFACT
from codemode.runtimes.errors import SandboxError
from codemode.runtimes.journal_replay import JournalEntry, replay
from codemode.runtimes.types import CheckpointTier

from .cell_ends import CellEnds
from .checkpoints import CheckpointScope
from .live_runs import LiveSession, cache_key, live_key
from .models import (
    MAX_VALUE_BYTES,
    CallRequest,
    CellRef,
    StepResult,
    Via,
    clip,
    human_bytes,
)
from .records import ErrorInfo
from .sandbox_host import SandboxHost
from .tools import ToolSpec

log = logging.getLogger(__name__)


#: A step may leave its checkpoint unsaved while the steps since the last saved one have run
#: for less than this (wall seconds): what a rebuild on another worker would redo.
DEFER_SECONDS = 0.05


def error_info(err: CodeExecutionError) -> ErrorInfo:
    return ErrorInfo(
        type=err.error_type,
        message=clip(err.message),
        kind=err.kind,
        line=err.line,
        traceback=clip(err.traceback, 4 * 8192) if err.traceback else None,
    )


class StepLoop:
    """``drive``: a run's step, on the host's runtimes, store and live runs; a cell's end is
    ``ends``'s."""

    def __init__(self, host: SandboxHost, ends: CellEnds) -> None:
        self.host, self.ends = host, ends

    async def drive(
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
        ``cell``: the execution is a cell of a session, which its end saves (``CellEnds.end_cell``).

        ``defer``: (bytes the step may add to the unsaved journal tail, bytes its answers
        already add). A step that may, that waits for exactly one call and has run for less
        than ``DEFER_SECONDS`` since the last saved checkpoint saves none: it keeps the run
        live on this worker (``StepResult.live``), and the next call's activity continues it
        here (issue 11: the dump and the store write were the largest per-call cost left).
        Anywhere else the run is rebuilt from the checkpoint before plus the journal entries
        since, which the workflow holds: no tool runs again, at most that much compute does."""
        began = time.perf_counter()
        rejected: list[JournalEntry] = []
        served: list[JournalEntry] = []  # save_artifact, answered here
        try:
            while True:
                event = first if first is not None else await execution.next_batch()
                first = None
                if isinstance(event, ExecutionResult):
                    self.host.live.close_later(execution)
                    too_big = _oversize("the code's output", event.output)
                    if too_big is not None:
                        oversize = ErrorInfo(type="ValueError", message=too_big, kind="resource")
                        return StepResult(
                            kind="error",
                            error=oversize,
                            rejected=rejected,
                            served=served,
                            stdout=event.stdout[stdout_offset:],
                            via=via,
                            fallback=fallback,
                            cell=await self.ends.end_cell(execution, cell, oversize) if cell is not None else None,
                        )
                    return StepResult(
                        kind="result",
                        result=event,
                        rejected=rejected,
                        served=served,
                        stdout=event.stdout[stdout_offset:],
                        stdout_truncated=event.stdout_truncated,
                        via=via,
                        fallback=fallback,
                        cell=await self.ends.end_cell(execution, cell, None) if cell is not None else None,
                    )
                calls: list[CallRequest] = []
                for call in event:
                    if call.function_name == SAVE_ARTIFACT:
                        data = execution.artifact_data.pop(call.call_id, None)
                        served.append(await self.host.artifacts.serve(scope, call, data))
                        await answer(execution, served[-1])
                        continue
                    spec = specs.get(call.function_name)
                    too_big = _oversize(f"the arguments of {call.function_name}()", [call.args, call.kwargs], "are")
                    try:
                        if spec is None:
                            raise NameError(f"name '{call.function_name}' is not defined")
                        if too_big is not None:  # (before validating: megabytes of arguments)
                            raise ValueError(too_big)
                        spec.validate(call.args, call.kwargs)
                    except (TypeError, ValueError, NameError) as err:
                        refused = JournalEntry.refused_oversized if too_big is not None else JournalEntry.raised
                        entry = refused(call, type(err).__name__, clip(str(err)))
                        rejected.append(entry)
                        await answer(execution, entry)
                        continue
                    calls.append(_call_request(call, spec))
                if not calls:
                    continue
                stdout = execution.stdout
                step = StepResult(
                    kind="calls",
                    calls=calls,
                    rejected=rejected,
                    served=served,
                    stdout=stdout[stdout_offset:],
                    via=via,
                    fallback=fallback,
                )
                runtime = self.host.runtime(execution.runtime)
                if defer is not None and len(calls) == 1 and not calls[0].requires_approval:
                    added = defer[1] + sum(len(to_json(e)) for e in [*rejected, *served])
                    ran = unsaved_s + (time.perf_counter() - began)
                    if (
                        added <= defer[0]
                        and ran <= DEFER_SECONDS
                        and runtime.capabilities.checkpoint_tier is CheckpointTier.SNAPSHOT
                    ):
                        step.live, step.deferred = uuid.uuid4().hex[:16], max(added, 1)
                        self.host.live.cache_snapshot(
                            execution.runtime,
                            live_key(scope.execution_id, step.live),
                            LiveSession(execution, specs, len(stdout), size=size, unsaved_s=ran, scope=scope),
                        )
                        return step
                checkpoint = await execution.checkpoint()
                if checkpoint is not None:
                    step.checkpoint = await self.host.checkpoints.save(scope, checkpoint)
                    step.holds_compute = runtime.capabilities.checkpoint_tier == CheckpointTier.SESSION
                    self.host.live.cache_snapshot(
                        execution.runtime,
                        cache_key(scope.execution_id, step.checkpoint),
                        LiveSession(execution, specs, len(stdout), size=step.checkpoint.size),
                    )
                else:
                    step.session_id = self.host.live.keep(LiveSession(execution, specs, len(stdout)))
                    step.session_queue = self.host.session_queue
                return step
        except CodeExecutionError as err:
            stdout = execution.stdout
            await execution.close()
            return StepResult(
                kind="error",
                error=error_info(err),
                rejected=rejected,
                served=served,
                stdout=stdout[stdout_offset:],
                via=via,
                fallback=fallback,
                cell=await self.ends.end_cell(execution, cell, error_info(err)) if cell is not None else None,
            )
        except SandboxError as err:
            await execution.close()
            if execution.session is not None:
                await execution.session.close()
            raise ApplicationError(f"the sandbox failed: {err}", type="SandboxError") from err
        except BaseException:
            await execution.close()
            raise


async def replay_from_checkpoint(
    execution: CodeExecution, journal: list[JournalEntry], ratchet: Ratchet
) -> list[FunctionCall] | ExecutionResult:
    """Bring a run restored at its checkpoint (paused at that step's calls) up to date: answer
    those calls and replay the rest of ``journal``; the first event beyond it."""
    waiting = {c.call_id for c in execution.pending_calls}
    rest: list[JournalEntry] = []
    for entry in journal:
        if entry.call_id in waiting:
            await answer(execution, entry, ratchet)
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
    """The call for the workflow, with the tool's policy. Whether it waits for a person is
    decided here, on the host (a predicate or rule of its arguments), and recorded with the
    step, so a replay of the workflow never asks again."""
    opts = spec.options
    request = CallRequest(
        call_id=call.call_id,
        tool=call.function_name,
        args=call.args,
        kwargs=call.kwargs,
        summary=spec.summarize(call.args, call.kwargs),
        line=call.line,
        max_attempts=opts.max_attempts,
        timeout_seconds=opts.timeout.total_seconds(),
        private_data=opts.private_data,
    )
    if opts.requires_approval is False and spec.approval_rules is None:
        return request
    try:
        arguments = spec.signature.bind(call.args, call.kwargs)  # validated before: binds
    except TypeError:  # a signature that only lists (a CLI command's): its keywords
        arguments = {**{str(i): a for i, a in enumerate(call.args)}, **call.kwargs}
    needed, reason = spec.needs_approval(arguments)
    if needed:
        request.requires_approval = True
        request.arguments = to_jsonable_python(arguments, fallback=repr)
        request.parameters_schema = parameters_schema(spec)
        request.returns_schema = spec.returns_schema
        request.approval_reason = reason
    return request


def parameters_schema(spec: ToolSpec) -> dict[str, Any]:
    """The schema an edit of the call's arguments is checked against: the tool's, closed to
    parameters it does not take (unless it takes ``**kwargs``)."""
    schema = dict(spec.signature.parameters_schema or {"type": "object"})
    if not any(p.kind == "var_keyword" for p in spec.signature.parameters) and "properties" in schema:
        schema.setdefault("additionalProperties", False)
    return schema


class Ratchet:
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


async def answer(execution: CodeExecution, entry: JournalEntry, ratchet: Ratchet | None = None) -> None:
    if ratchet is not None:
        await ratchet.before(entry)
    if entry.error_type is None:
        await execution.provide_result(entry.value(), call_id=entry.call_id)
    else:
        await execution.provide_error(entry.error_type, entry.error_message, call_id=entry.call_id)
