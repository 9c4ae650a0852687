"""The activity calls of ``CodeExecutionWorkflow``: its sandbox steps, the release and pause
of what a run holds in the sandbox layer, its stored state, and each tool call.

Workflow code (deterministic, run in the workflow sandbox): what it schedules is recorded in
the history, so activity names and options here are those the committed histories replay.
``on_own_queue`` is the one placement for a step that must reach the worker holding something
live (a process, a session): that worker's own queue, one attempt; the caller falls back to
any worker when it fails.
"""

from __future__ import annotations

from datetime import timedelta
from types import MappingProxyType
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.models import (
        CallRequest,
        LoadStateInput,
        NextStep,
        ParkResult,
        ReleaseInput,
        SaveStateInput,
        SegmentRef,
        StateSegment,
        StepResult,
        ToolInput,
        ToolOutput,
    )
    from codemode.runtimes.runner.parking import DEFAULT_RELEASE_AFTER

#: Runtimes whose steps are cheap, stateless and snapshot-based: run them as local activities.
LOCAL_STEP_RUNTIMES = frozenset({"monty"})
#: Runtimes whose *first* step is a local activity too (since generation-49): the python
#: runtime's start runs on the worker that runs the workflow task, in that task, instead of
#: waiting for an activity task and a second workflow task (about 15-20 ms of its first call).
#: Its later steps stay regular activities on the worker holding its live interpreter.
LOCAL_START_RUNTIMES = LOCAL_STEP_RUNTIMES | {"python"}
STEP_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200))
#: Storing and reading back a long execution's state segments: retried until they work (a
#: worker without a key the segment was sealed with gives way to one that has it), except
#: when the segment is gone for good.
STATE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1), non_retryable_error_types=["StateLost"]
)
#: How long a step waits for the worker holding a live sandbox before replaying elsewhere.
STICKY_SCHEDULE_TO_START = timedelta(seconds=10)
#: Regular-activity steps heartbeat, so a step lost with its worker is retried in seconds.
STEP_HEARTBEAT = timedelta(seconds=5)
#: Short on purpose: a resume step is written into the history once per tool call.
STEP_SUMMARIES = MappingProxyType({names.SANDBOX_START: "start", names.SANDBOX_RESUME: "resume"})


async def on_own_queue(
    name: str,
    arg: object,
    queue: str,
    *,
    start_to_close: timedelta,
    summary: str,
    result_type: type | None = None,
    heartbeat: timedelta | None = None,
    schedule_to_start: timedelta = STICKY_SCHEDULE_TO_START,
) -> Any:
    """Run activity ``name`` on the worker that holds something live for it (its own task
    ``queue``), once: if that worker does not take it within ``schedule_to_start`` (stopped
    or busy) or it fails there, ActivityError, and the caller goes to any worker instead."""
    return await workflow.execute_activity(
        name,
        arg,
        result_type=result_type,
        task_queue=queue,
        schedule_to_start_timeout=schedule_to_start,
        start_to_close_timeout=start_to_close,
        heartbeat_timeout=heartbeat,
        retry_policy=RetryPolicy(maximum_attempts=1),
        summary=summary,
    )


async def step_on_own_queue(name: str, arg: object, queue: str, *, timeout: timedelta) -> StepResult:
    """A sandbox step (start or resume) on the queue of the worker holding its live sandbox."""
    return await on_own_queue(
        name,
        arg,
        queue,
        result_type=StepResult,
        start_to_close=timeout,
        heartbeat=STEP_HEARTBEAT,
        summary=STEP_SUMMARIES[name],
    )


async def run_step(name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
    """A sandbox step on any worker: a local activity for the runtimes that allow it."""
    summary = STEP_SUMMARIES.get(name)
    if local:
        return await workflow.execute_local_activity(
            name,
            arg,
            result_type=StepResult,
            start_to_close_timeout=timeout,
            retry_policy=STEP_RETRY,
            summary=summary,
        )
    return await workflow.execute_activity(
        name,
        arg,
        result_type=StepResult,
        start_to_close_timeout=timeout,
        heartbeat_timeout=STEP_HEARTBEAT,
        retry_policy=STEP_RETRY,
        summary=summary,
    )


async def release_sandbox(inp: ReleaseInput, queue: str | None, summary: str = "release") -> None:
    """Free what the sandbox layer still holds for an execution (``queue``: the worker that
    keeps its live process). Best effort: a leftover is swept at retention."""
    try:
        if queue:
            await on_own_queue(
                names.SANDBOX_RELEASE, inp, queue, start_to_close=timedelta(seconds=30), summary=summary
            )
        elif inp.runtime in LOCAL_STEP_RUNTIMES:
            await workflow.execute_local_activity(
                names.SANDBOX_RELEASE,
                inp,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=STEP_RETRY,
                summary=summary,
            )
        else:
            await workflow.execute_activity(
                names.SANDBOX_RELEASE,
                inp,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=STEP_RETRY,
                summary=summary,
            )
    except (ActivityError, ApplicationError) as err:
        workflow.logger.warning("releasing the sandbox failed: %s", step_cause(err))


async def suspend_sandbox(inp: ReleaseInput) -> None:
    """Pause the sandbox of a run about to wait for a person (``inp.mode == "suspend"``)."""
    try:
        await workflow.execute_activity(
            names.SANDBOX_RELEASE,
            inp,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=STEP_RETRY,
            summary="pause the sandbox while waiting",
        )
    except (ActivityError, ApplicationError) as err:
        # Not fatal: the sandbox keeps running (and costing) until its own timeout pauses it.
        workflow.logger.warning("pausing the sandbox failed: %s", step_cause(err))


async def park_sandbox(inp: ReleaseInput) -> ParkResult:
    """Pause the sandbox of a run about to wait for a person; what it does while the run
    waits (a failure to say is a sandbox that keeps running: released after the default)."""
    try:
        return await workflow.execute_activity(
            names.SANDBOX_PARK,
            inp,
            result_type=ParkResult,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=STEP_RETRY,
            summary="park the sandbox while waiting",
        )
    except (ActivityError, ApplicationError) as err:
        why = f"parking it failed: {step_cause(err)}"
        return ParkResult(parked_as="running", why=why, release_after=DEFAULT_RELEASE_AFTER)


async def load_state(inp: LoadStateInput, *, summary: str) -> StateSegment:
    """The stored segments of a long execution's state (journal and call records), joined."""
    return await workflow.execute_local_activity(
        names.SANDBOX_LOAD_STATE,
        inp,
        result_type=StateSegment,
        start_to_close_timeout=timedelta(seconds=120),
        retry_policy=STATE_RETRY,
        summary=summary,
    )


async def save_state(inp: SaveStateInput, *, summary: str) -> SegmentRef:
    """Store a segment of state; the history keeps only its reference."""
    return await workflow.execute_local_activity(
        names.SANDBOX_SAVE_STATE,
        inp,
        result_type=SegmentRef,
        start_to_close_timeout=timedelta(seconds=120),
        retry_policy=STATE_RETRY,
        summary=summary,
    )


async def run_tool(call: CallRequest, then: NextStep | None, *, summary: str) -> ToolOutput:
    """One tool call's activity (named after the tool), retried by the tool's policy; with
    ``then``, the activity runs the sandbox step after the call too."""
    timeout = call.timeout_seconds + (then.step_timeout if then is not None else 0)
    return await workflow.execute_activity(
        call.tool,
        ToolInput(
            call_id=call.call_id,
            args=call.args,
            kwargs=call.kwargs,
            then=then,
            timeout_seconds=call.timeout_seconds if then is not None else None,
            received_sha256=call.received_sha256,
        ),
        result_type=ToolOutput,
        activity_id=f"call-{call.call_id}",
        start_to_close_timeout=timedelta(seconds=timeout),
        retry_policy=RetryPolicy(
            maximum_attempts=call.max_attempts,
            initial_interval=timedelta(seconds=1),
            backoff_coefficient=2.0,
            maximum_interval=timedelta(seconds=30),
        ),
        summary=summary,
    )


def step_cause(err: ActivityError | ApplicationError) -> BaseException:
    """What failed a step: an activity's failure arrives as ActivityError(cause=...), a local
    activity's (temporalio 1.35) as the ApplicationError itself."""
    return err.cause if isinstance(err, ActivityError) and err.cause is not None else err


def why_not_live(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, TemporalTimeoutError):
        return "the worker holding the live sandbox did not take the step in time (stopped or busy)"
    if isinstance(cause, ApplicationError):
        return cause.message
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err)


def tool_failure(err: ActivityError, call: CallRequest) -> tuple[str, str, int]:
    """(exception type name, message, attempts) of a tool's final failure."""
    cause = err.cause
    if isinstance(cause, ApplicationError):
        attempts = call.max_attempts
        if cause.details and isinstance(cause.details[0], dict):
            attempts = int(cause.details[0].get("attempt", attempts))
        return cause.type or "RuntimeError", cause.message, attempts
    if isinstance(cause, TemporalTimeoutError):
        return (
            "TimeoutError",
            f"{call.tool} timed out after {call.max_attempts} attempt(s) of {call.timeout_seconds:g}s",
            call.max_attempts,
        )
    return "RuntimeError", f"{call.tool} failed: {cause or err}", call.max_attempts
