"""``CodeExecutionWorkflow``: one workflow per code execution. Orchestration only.

No I/O, no clock, no randomness, no sandbox import here: sandbox steps and tools are
activities. The history holds decisions, call records and references: a checkpoint is in
the object store and only its hash and size are recorded, large payloads travel as
external-storage references, and a long execution continues as new (same execution id)
before the server's history limits, carrying a ``Continuation``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from activities.models import (
        CHECKPOINT_REFUSED,
        RECORD_RESULT_BYTES,
        SESSION_GONE,
        CallRequest,
        CheckpointRef,
        ReleaseInput,
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
    from workflows.state import Continuation, Cursor

#: Runtimes whose steps are cheap, stateless and snapshot-based: run them as local activities.
LOCAL_STEP_RUNTIMES = frozenset({"monty"})
STATUS_KEY = SearchAttributeKey.for_keyword(SA_STATUS)
RUNTIME_KEY = SearchAttributeKey.for_keyword(SA_RUNTIME)
STEP_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=200))
#: How long a step waits for the worker holding a live sandbox before replaying elsewhere.
STICKY_SCHEDULE_TO_START = timedelta(seconds=10)
#: Regular-activity steps heartbeat, so a step lost with its worker is retried in seconds.
STEP_HEARTBEAT = timedelta(seconds=5)
#: Calls of one gathered batch run (and are recorded) this many at a time, so even a batch
#: of thousands leaves room to continue as new between windows.
CALL_WINDOW = 64
#: Our own ceilings for one run, in case the server's continue-as-new suggestion is off or
#: set high: far below its hard limits (51,200 events, 50 MB).
MAX_RUN_EVENTS = 10_000
MAX_RUN_BYTES = 10 * 1024 * 1024
#: Calls the status query returns at most (a long execution is read in pages).
STATUS_PAGE = 500


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
        self._runs: list[str] = []
        self._code_approval: ApprovalRecord | None = None
        #: What the execution holds in the sandbox layer right now, released at the end.
        self._checkpoint: CheckpointRef | None = None
        self._superseded: CheckpointRef | None = None
        self._session: tuple[str, str | None] | None = None
        self._started: datetime | None = None

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
    def status(self, since: int | None = None) -> ExecutionStatus:
        """The state, pending approvals, stdout and a page of the calls: from index ``since``,
        or the last ``STATUS_PAGE`` calls when it is not given."""
        calls = list(self._calls.values())
        start = max(len(calls) - STATUS_PAGE, 0) if since is None else max(since, 0)
        return ExecutionStatus(
            state=self._state,
            runtime=self._runtime,
            pending_approvals=list(self._pending.values()),
            tool_calls=calls[start : start + STATUS_PAGE],
            calls_from=start,
            call_count=len(calls),
            stdout="".join(self._stdout),
            error=self._error,
            runs=len(self._runs) + 1,
        )

    # -- the run ------------------------------------------------------------------------

    @workflow.run
    async def run(self, req: CodeExecutionRequest, carry: Continuation | None = None) -> ExecutionOutcome:
        # A client starts the execution with the request alone; the SDK only applies type
        # hints when the argument count matches them, so the one-argument start arrives as JSON.
        if not isinstance(req, CodeExecutionRequest):
            req = CodeExecutionRequest.model_validate(req)
        info = workflow.info()
        self._runtime = req.runtime
        self._index = req.index_search_attributes
        self._started = started = carry.started_at if carry else workflow.now()
        if carry is not None:
            self._runs = list(carry.runs)
            self._calls = {c.call_id: c for c in carry.calls}
            self._journal = list(carry.journal)
            self._stdout = [carry.stdout] if carry.stdout else []
            self._stdout_len = len(carry.stdout)
            self._code_approval = carry.code_approval
        elif self._index:
            workflow.upsert_search_attributes([STATUS_KEY.value_set("running"), RUNTIME_KEY.value_set(req.runtime)])
        start = StartInput(
            execution_id=info.workflow_id,
            runtime=req.runtime,
            code=req.code,
            inputs=req.inputs,
            tools=req.tools,
            limits=req.limits,
            first_run_id=info.first_execution_run_id,
        )
        try:
            success, output, error = await self._execute(req, start, carry)
        except asyncio.CancelledError:
            self._set_state("cancelled")
            for record in self._calls.values():
                if record.status in ("pending", "running", "awaiting_approval"):
                    record.status = "cancelled"
            workflow.set_current_details("Cancelled")
            await self._release(start)
            raise
        self._error = error
        self._set_state("completed" if success else "failed")
        await self._release(start)
        return ExecutionOutcome(
            execution_id=info.workflow_id,
            runs=len(self._runs) + 1,
            success=success,
            output=output,
            stdout="".join(self._stdout),
            error=error,
            tool_calls=list(self._calls.values()),
            duration_ms=(workflow.now() - started).total_seconds() * 1000,
            runtime=req.runtime,
        )

    async def _execute(
        self, req: CodeExecutionRequest, start: StartInput, carry: Continuation | None
    ) -> tuple[bool, object, ErrorInfo | None]:
        """Drive the code to its end: ``(success, output, error)``."""
        local = req.runtime in LOCAL_STEP_RUNTIMES
        timeout = timedelta(seconds=req.limits.timeout_seconds + 60)
        if carry is not None:
            cursor = carry.cursor  # its step was recorded by the run before
            self._hold(cursor.step, cursor.superseded)
        else:
            if req.require_code_approval:
                review = PendingApproval(call_id=CODE_APPROVAL_ID, tool="<code>", args=[req.code], summary="run this code")
                self._code_approval = await self._await_approval(review, req.approval_timeout)
                if self._code_approval.decision != "approved":
                    return False, None, _permission_error("the code", self._code_approval)
            step = await self._step("sandbox_start", start, local=local, timeout=timeout)
            cursor = self._take(step, superseded=None)
        while True:
            step = cursor.step
            if step.kind == "result":
                assert step.result is not None
                return True, step.result.output, None
            if step.kind == "error":
                return False, None, step.error
            while cursor.remaining:
                window, cursor.remaining = cursor.remaining[:CALL_WINDOW], cursor.remaining[CALL_WINDOW:]
                workflow.set_current_details("Running " + ", ".join(f"`{c.summary}`" for c in window[:5]))
                answers = await asyncio.gather(*(self._run_call(c, req.approval_timeout) for c in window))
                cursor.answers.extend(answers)
                self._journal.extend(answers)
                if cursor.remaining and self._should_roll_over():
                    await self._roll_over(req, cursor)
            if self._should_roll_over():
                await self._roll_over(req, cursor)
            resume = ResumeInput(
                execution_id=start.execution_id,
                runtime=req.runtime,
                first_run_id=start.first_run_id,
                checkpoint=step.checkpoint,
                superseded=cursor.superseded,
                session_id=step.session_id,
                answers=cursor.answers,
                tools=req.tools,
                stdout_offset=self._stdout_len,
            )
            if step.checkpoint is None and step.session_id is None:  # nothing to continue from
                resume = self._with_journal(resume, start, "the previous step left no checkpoint")
            step = await self._resume(resume, cursor.step, start, local=local, timeout=timeout)
            cursor = self._take(step, superseded=resume.checkpoint)

    def _take(self, step: StepResult, superseded: CheckpointRef | None) -> Cursor:
        """Record a step's outcome; the cursor that works through its calls."""
        self._absorb(step)
        self._hold(step, superseded)
        return Cursor(step=step, remaining=list(step.calls), superseded=superseded)

    def _hold(self, step: StepResult, superseded: CheckpointRef | None) -> None:
        """Note what the sandbox layer holds after ``step`` (released when the run ends)."""
        if step.kind == "calls":  # holds its own checkpoint; the one before is deleted next step
            self._checkpoint, self._superseded = step.checkpoint, superseded
        else:  # finished: the checkpoint it consumed is the last one left
            self._checkpoint, self._superseded = superseded, None
        self._session = (step.session_id, step.session_queue) if step.session_id else None

    # -- continue-as-new ------------------------------------------------------------------

    def _should_roll_over(self) -> bool:
        if self._pending:
            return False  # never while a person is deciding: the run is parked, its history idle
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > MAX_RUN_EVENTS
            or info.get_current_history_size() > MAX_RUN_BYTES
        )

    async def _roll_over(self, req: CodeExecutionRequest, cursor: Cursor) -> NoReturn:
        await workflow.wait_condition(workflow.all_handlers_finished)
        assert self._started is not None
        carry = Continuation(
            started_at=self._started,
            runs=[*self._runs, workflow.info().run_id],
            calls=list(self._calls.values()),
            journal=self._journal,
            stdout="".join(self._stdout),
            code_approval=self._code_approval,
            cursor=cursor,
        )
        workflow.continue_as_new(args=[req, carry])

    # -- steps ------------------------------------------------------------------------------

    async def _step(self, name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
        try:
            return await self._run_step(name, arg, local=local, timeout=timeout)
        except (ActivityError, ApplicationError) as err:
            raise self._sandbox_failure(name, err) from err

    async def _run_step(self, name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
        summary = _STEP_SUMMARIES.get(name)
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

    def _sandbox_failure(self, name: str, err: ActivityError | ApplicationError) -> ApplicationError:
        self._set_state("failed")
        cause = _step_cause(err)
        return ApplicationError(
            f"sandbox step {name} failed: {type(cause).__name__}: {cause}", type="SandboxError", non_retryable=True
        )

    def _with_journal(self, inp: ResumeInput, start: StartInput, reason: str) -> ResumeInput:
        """The resume input for a journal replay (the only time the journal travels)."""
        return inp.model_copy(
            update={
                "checkpoint": None,
                "session_id": None,
                "start": start,
                "journal": list(self._journal),
                "replay_reason": reason,
            }
        )

    async def _resume(
        self, inp: ResumeInput, previous: StepResult, start: StartInput, *, local: bool, timeout: timedelta
    ) -> StepResult:
        if inp.session_id and previous.session_queue:
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
                    summary=_STEP_SUMMARIES["sandbox_resume"],
                )
            except ActivityError as err:
                reason = _why_not_live(err)
                workflow.logger.info("live sandbox unavailable (%s); replaying the journal", reason)
                inp = self._with_journal(inp, start, reason)
        elif inp.checkpoint is not None:
            try:
                return await self._run_step("sandbox_resume", inp, local=local, timeout=timeout)
            except (ActivityError, ApplicationError) as err:
                cause = _step_cause(err)
                if not (isinstance(cause, ApplicationError) and cause.type in (CHECKPOINT_REFUSED, SESSION_GONE)):
                    raise self._sandbox_failure("sandbox_resume", err) from err
                workflow.logger.warning("checkpoint refused (%s); replaying the journal", cause.message)
                inp = self._with_journal(inp, start, cause.message)
        return await self._step("sandbox_resume", inp, local=False, timeout=timeout)

    async def _release(self, start: StartInput) -> None:
        """Free what the sandbox layer still holds for this execution (its last checkpoint, a
        live process, a cloud sandbox). Best effort: a leftover is swept at retention."""
        checkpoint, superseded, session = self._checkpoint, self._superseded, self._session
        self._checkpoint = self._superseded = self._session = None
        if checkpoint is None and session is None:
            return
        inp = ReleaseInput(
            execution_id=start.execution_id,
            runtime=start.runtime,
            first_run_id=start.first_run_id,
            checkpoint=checkpoint,
            superseded=superseded,
            session_id=session[0] if session else None,
        )
        try:
            if session is not None and session[1]:
                await workflow.execute_activity(
                    "sandbox_release",
                    inp,
                    task_queue=session[1],
                    schedule_to_start_timeout=STICKY_SCHEDULE_TO_START,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_attempts=1),
                    summary="release",
                )
            elif start.runtime in LOCAL_STEP_RUNTIMES:
                await workflow.execute_local_activity(
                    "sandbox_release",
                    inp,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=STEP_RETRY,
                    summary="release",
                )
            else:
                await workflow.execute_activity(
                    "sandbox_release",
                    inp,
                    start_to_close_timeout=timedelta(seconds=60),
                    retry_policy=STEP_RETRY,
                    summary="release",
                )
        except (ActivityError, ApplicationError) as err:
            workflow.logger.warning("releasing the sandbox failed: %s", _step_cause(err))

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

    async def _run_call(self, call: CallRequest, approval_timeout: timedelta) -> JournalEntry:
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
                ToolInput(call_id=call.call_id, args=call.args, kwargs=call.kwargs),
                result_type=ToolOutput,
                activity_id=f"call-{call.call_id}",
                start_to_close_timeout=timedelta(seconds=call.timeout_seconds),
                retry_policy=RetryPolicy(
                    maximum_attempts=call.max_attempts,
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=30),
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
        record.attempts = out.attempt
        record.result_size = out.size
        if out.size <= RECORD_RESULT_BYTES:
            record.result = out.value
        else:
            record.result_preview = _preview(out.value)
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


#: Short on purpose: a resume step is written into the history once per tool call.
_STEP_SUMMARIES = {"sandbox_start": "start", "sandbox_resume": "resume"}


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


def _preview(value: object, limit: int = 200) -> str:
    """The start of a large result, for the audit record (the whole value is in the journal)."""
    if isinstance(value, list):
        head = f"[{len(value)} items] "
        first = value[:1]
    elif isinstance(value, dict):
        head = f"{{{len(value)} keys}} "
        first = list(value)[:8]
    else:
        head, first = "", value
    text = head + repr(first)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _why_not_live(err: ActivityError) -> str:
    cause = err.cause
    if isinstance(cause, TemporalTimeoutError):
        return "the worker holding the live sandbox did not take the step in time (stopped or busy)"
    if isinstance(cause, ApplicationError):
        return cause.message
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
