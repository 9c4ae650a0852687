"""``CodeExecutionWorkflow``: one workflow per code execution. Orchestration only.

No I/O, no clock, no randomness, no sandbox import here: sandbox steps and tools are
activities; the checkpoint (or the journal of recorded results) lives in workflow state,
so a run parked for approval holds no sandbox and no process.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        CHECKPOINT_REFUSED,
        CallRequest,
        ResumeInput,
        StartInput,
        StepResult,
        ToolInput,
        ToolOutput,
    )
    from runtimes.replay import JournalEntry
    from workflows.models import (
        CODE_APPROVAL_ID,
        SA_RUNTIME,
        SA_STATUS,
        WORKFLOW_TYPE,
        ApprovalRecord,
        ApproveSignal,
        CodeExecutionRequest,
        DenySignal,
        ErrorInfo,
        ExecutionOutcome,
        ExecutionState,
        ExecutionStatus,
        PendingApproval,
        ToolCallRecord,
    )

#: Runtimes whose steps are cheap, stateless and snapshot-based: run them as local activities.
LOCAL_STEP_RUNTIMES = frozenset({"monty"})
STATUS_KEY = SearchAttributeKey.for_keyword(SA_STATUS)
RUNTIME_KEY = SearchAttributeKey.for_keyword(SA_RUNTIME)
STEP_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200))
#: How long a step waits for the worker holding a live sandbox before replaying elsewhere.
STICKY_SCHEDULE_TO_START = timedelta(seconds=10)
#: Regular-activity steps heartbeat, so a step lost with its worker is retried in seconds.
STEP_HEARTBEAT = timedelta(seconds=5)


@workflow.defn(name=WORKFLOW_TYPE)
class CodeExecutionWorkflow:
    def __init__(self) -> None:
        self._state: ExecutionState = "running"
        self._runtime = "monty"
        self._calls: dict[str, ToolCallRecord] = {}
        self._pending: dict[str, PendingApproval] = {}
        self._decisions: dict[str, ApprovalRecord] = {}
        self._journal: list[JournalEntry] = []
        self._stdout: list[str] = []
        self._stdout_len = 0
        self._error: ErrorInfo | None = None
        self._index = True

    # -- handlers -----------------------------------------------------------------------

    @workflow.signal
    def approve(self, signal: ApproveSignal) -> None:
        if signal.call_id in self._pending and signal.call_id not in self._decisions:
            self._decisions[signal.call_id] = ApprovalRecord(decision="approved", by=signal.by, comment=signal.comment)
        else:
            workflow.logger.warning("approve for %s ignored: no such pending approval", signal.call_id)

    @workflow.signal
    def deny(self, signal: DenySignal) -> None:
        if signal.call_id in self._pending and signal.call_id not in self._decisions:
            self._decisions[signal.call_id] = ApprovalRecord(decision="denied", by=signal.by, comment=signal.reason)
        else:
            workflow.logger.warning("deny for %s ignored: no such pending approval", signal.call_id)

    @workflow.query
    def status(self) -> ExecutionStatus:
        return ExecutionStatus(
            state=self._state,
            runtime=self._runtime,
            pending_approvals=list(self._pending.values()),
            tool_calls=list(self._calls.values()),
            stdout="".join(self._stdout),
            error=self._error,
        )

    # -- the run ------------------------------------------------------------------------

    @workflow.run
    async def run(self, req: CodeExecutionRequest) -> ExecutionOutcome:
        started = workflow.now()
        execution_id = workflow.info().workflow_id
        self._runtime = req.runtime
        self._index = req.index_search_attributes
        if self._index:
            workflow.upsert_search_attributes([STATUS_KEY.value_set("running"), RUNTIME_KEY.value_set(req.runtime)])

        def finish(success: bool, output: object = None, error: ErrorInfo | None = None) -> ExecutionOutcome:
            self._error = error
            self._set_state("completed" if success else "failed")
            return ExecutionOutcome(
                execution_id=execution_id,
                success=success,
                output=output,
                stdout="".join(self._stdout),
                error=error,
                tool_calls=list(self._calls.values()),
                duration_ms=(workflow.now() - started).total_seconds() * 1000,
                runtime=req.runtime,
            )

        if req.require_code_approval:
            review = PendingApproval(call_id=CODE_APPROVAL_ID, tool="<code>", args=[req.code], summary="run this code")
            decision = await self._await_approval(review, req.approval_timeout)
            if decision.decision != "approved":
                return finish(False, error=_permission_error("the code", decision))

        start = StartInput(
            execution_id=execution_id,
            runtime=req.runtime,
            code=req.code,
            inputs=req.inputs,
            tools=req.tools,
            limits=req.limits,
        )
        step_timeout = timedelta(seconds=req.limits.timeout_seconds + 60)
        local = req.runtime in LOCAL_STEP_RUNTIMES
        step = await self._step("sandbox_start", start, local=local, timeout=step_timeout)
        while True:
            self._absorb(step)
            if step.kind == "result":
                assert step.result is not None
                return finish(True, output=step.result.output)
            if step.kind == "error":
                return finish(False, error=step.error)
            workflow.set_current_details(
                "Running " + ", ".join(f"`{c.summary}`" for c in step.calls)
            )
            answers = list(
                await asyncio.gather(*(self._run_call(execution_id, c, req.approval_timeout) for c in step.calls))
            )
            self._journal.extend(answers)
            resume = ResumeInput(
                execution_id=execution_id,
                runtime=req.runtime,
                checkpoint=step.checkpoint,
                session_id=step.session_id,
                answers=answers,
                tools=req.tools,
                stdout_offset=self._stdout_len,
            )
            if step.checkpoint is None:  # journal tier: everything needed to rebuild by replay
                resume.start = start
                resume.journal = list(self._journal)
            step = await self._resume(resume, step, start, local=local, timeout=step_timeout)

    # -- steps ------------------------------------------------------------------------------

    async def _step(self, name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
        try:
            return await self._run_step(name, arg, local=local, timeout=timeout)
        except (ActivityError, ApplicationError) as err:
            raise self._sandbox_failure(name, err) from err

    async def _run_step(self, name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
        if local:
            return await workflow.execute_local_activity(
                name, arg, result_type=StepResult, start_to_close_timeout=timeout, retry_policy=STEP_RETRY
            )
        return await workflow.execute_activity(
            name,
            arg,
            result_type=StepResult,
            start_to_close_timeout=timeout,
            heartbeat_timeout=STEP_HEARTBEAT,
            retry_policy=STEP_RETRY,
        )

    def _sandbox_failure(self, name: str, err: ActivityError | ApplicationError) -> ApplicationError:
        self._set_state("failed")
        cause = _step_cause(err)
        return ApplicationError(
            f"sandbox step {name} failed: {type(cause).__name__}: {cause}", type="SandboxError", non_retryable=True
        )

    async def _resume(
        self, inp: ResumeInput, previous: StepResult, start: StartInput, *, local: bool, timeout: timedelta
    ) -> StepResult:
        if previous.session_id and previous.session_queue:
            try:
                return await workflow.execute_activity(
                    "sandbox_resume",
                    inp,
                    result_type=StepResult,
                    task_queue=previous.session_queue,
                    schedule_to_start_timeout=STICKY_SCHEDULE_TO_START,
                    start_to_close_timeout=timeout,
                    heartbeat_timeout=STEP_HEARTBEAT,
                    retry_policy=RetryPolicy(maximum_attempts=1),
                )
            except ActivityError as err:
                workflow.logger.info("live sandbox unavailable (%s); replaying the journal", _cause_message(err))
                inp = inp.model_copy(update={"session_id": None})
        elif inp.checkpoint is not None:
            try:
                return await self._run_step("sandbox_resume", inp, local=local, timeout=timeout)
            except (ActivityError, ApplicationError) as err:
                cause = _step_cause(err)
                if not (isinstance(cause, ApplicationError) and cause.type == CHECKPOINT_REFUSED):
                    raise self._sandbox_failure("sandbox_resume", err) from err
                workflow.logger.warning("checkpoint refused (%s); replaying the journal", cause)
                inp = inp.model_copy(update={"checkpoint": None, "start": start, "journal": list(self._journal)})
        return await self._step("sandbox_resume", inp, local=local and inp.checkpoint is not None, timeout=timeout)

    def _absorb(self, step: StepResult) -> None:
        if step.stdout:
            self._stdout.append(step.stdout)
            self._stdout_len += len(step.stdout)
        for entry in step.rejected:
            self._journal.append(entry)
            self._calls[entry.call_id] = ToolCallRecord(
                call_id=entry.call_id,
                tool=entry.function_name,
                args=entry.args,
                kwargs=entry.kwargs,
                status="error",
                error=ErrorInfo(type=entry.error_type or "", message=entry.error_message, kind="invalid_call"),
                attempts=0,
                summary=entry.describe(),
            )

    # -- one call ------------------------------------------------------------------------------

    async def _run_call(self, execution_id: str, call: CallRequest, approval_timeout: timedelta) -> JournalEntry:
        """Approve (if needed) and run one call; its outcome as a journal entry."""
        record = ToolCallRecord(
            call_id=call.call_id, tool=call.tool, args=call.args, kwargs=call.kwargs, summary=call.summary
        )
        self._calls[call.call_id] = record
        if call.requires_approval:
            record.status = "awaiting_approval"
            review = PendingApproval(
                call_id=call.call_id, tool=call.tool, args=call.args, kwargs=call.kwargs, summary=call.summary
            )
            record.approval = await self._await_approval(review, approval_timeout)
            if record.approval.decision != "approved":
                record.status = "denied" if record.approval.decision == "denied" else "timed_out"
                record.error = _permission_error(call.summary, record.approval)
                return _entry(call, error=("PermissionError", record.error.message))
        record.status = "running"
        try:
            out = await workflow.execute_activity(
                call.tool,
                ToolInput(
                    execution_id=execution_id,
                    call_id=call.call_id,
                    tool=call.tool,
                    args=call.args,
                    kwargs=call.kwargs,
                ),
                result_type=ToolOutput,
                activity_id=f"call-{call.call_id}",
                start_to_close_timeout=timedelta(seconds=call.timeout_seconds),
                retry_policy=RetryPolicy(
                    maximum_attempts=call.max_attempts,
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=30),
                    non_retryable_error_types=call.non_retryable or None,
                ),
                summary=call.summary,
            )
        except ActivityError as err:
            etype, message, attempts = _tool_failure(err, call)
            record.status = "error"
            record.attempts = attempts
            record.error = ErrorInfo(type=etype, message=message, kind="tool", line=call.line)
            return _entry(call, error=(etype, message))
        record.status = "ok"
        record.result = out.value
        record.attempts = out.attempt
        return _entry(call, result=out.value)

    async def _await_approval(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord:
        self._pending[review.call_id] = review
        self._set_state("awaiting_approval")
        workflow.set_current_details(f"Awaiting approval of `{review.summary}` (call id `{review.call_id}`)")
        try:
            await workflow.wait_condition(lambda: review.call_id in self._decisions, timeout=timeout)
            decision = self._decisions[review.call_id]
        except asyncio.TimeoutError:
            decision = ApprovalRecord(decision="timed_out", comment=f"no decision within {timeout}")
        # Not in a finally: on eviction the coroutine is closed and must not touch workflow APIs.
        del self._pending[review.call_id]
        if not self._pending:
            self._set_state("running")
        return decision

    def _set_state(self, state: ExecutionState) -> None:
        if state == self._state:
            return
        self._state = state
        if self._index:
            workflow.upsert_search_attributes([STATUS_KEY.value_set(state)])


def _entry(call: CallRequest, *, result: object = None, error: tuple[str, str] | None = None) -> JournalEntry:
    return JournalEntry(
        call_id=call.call_id,
        function_name=call.tool,
        args=call.args,
        kwargs=call.kwargs,
        result=result,
        error_type=error[0] if error else None,
        error_message=error[1] if error else "",
    )


def _permission_error(what: str, decision: ApprovalRecord) -> ErrorInfo:
    if decision.decision == "denied":
        by = f" by {decision.by}" if decision.by else ""
        why = f": {decision.comment}" if decision.comment else ""
        return ErrorInfo(type="PermissionError", message=f"{what} was denied{by}{why}", kind="denied")
    return ErrorInfo(type="PermissionError", message=f"{what} was not approved in time", kind="denied")


def _step_cause(err: ActivityError | ApplicationError) -> BaseException:
    """What failed a step: an activity's failure arrives as ActivityError(cause=...), a local
    activity's (temporalio 1.35) as the ApplicationError itself."""
    return err.cause if isinstance(err, ActivityError) and err.cause is not None else err


def _cause_message(err: ActivityError) -> str:
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(err)


def _tool_failure(err: ActivityError, call: CallRequest) -> tuple[str, str, int]:
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
