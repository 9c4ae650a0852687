"""``CodeExecutionWorkflow``: one workflow per code execution. Orchestration only.

No I/O, no clock, no randomness, no sandbox import here: sandbox steps and tools are activities.
The history holds decisions, call records and references: a checkpoint is in the object store
(only its hash and size are recorded), large payloads travel as external-storage references,
and a long execution continues as new (same id) before the history limits, with a ``Continuation``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from functools import partial
from typing import NoReturn

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.artifact_refs import artifacts_of
    from codemode.activities.models import (
        CHECKPOINT_REFUSED,
        SESSION_GONE,
        CallRequest,
        CellEnd,
        CellRef,
        CheckpointRef,
        NextStep,
        ResumeInput,
        SegmentRef,
        StartInput,
        StepResult,
    )
    from codemode.activities.sandbox_sweep import SANDBOX_HELD_QUERY, HeldSandbox
    from codemode.activities.step_answers import answered_in_step
    from codemode.runtimes.journal_replay import JournalEntry
    from codemode.runtimes.types import Determinism
    from codemode.workflows.approvals import Approvals, permission_error, summary
    from codemode.workflows.call_outcomes import final_details
    from codemode.workflows.call_window import call_window
    from codemode.workflows.child_execution import indexed_at_start
    from codemode.workflows.continuation import Continuation, Cursor, can_fuse
    from codemode.workflows.earlier_runs import all_calls, store_cell_journal, store_run
    from codemode.workflows.models import (
        RUNTIME_KEY,
        STATUS_KEY,
        WORKFLOW_TYPE,
        ApprovalRecord,
        CodeExecutionRequest,
        Decision,
        ErrorInfo,
        ExecutionOutcome,
        ExecutionState,
        ExecutionStatus,
        RollbackInfo,
        RollbackRequest,
        UndoLog,
        call_order,
    )
    from codemode.workflows.parking import Parking
    from codemode.workflows.signal_input import decision_input
    from codemode.workflows.snippet_state import SnippetState
    from codemode.workflows.step_activities import (
        LOCAL_START_RUNTIMES,
        LOCAL_STEP_RUNTIMES,
        release_sandbox,
        run_step,
        step_cause,
        step_on_own_queue,
        why_not_live,
    )
    from codemode.workflows.step_state import DeferredTail, Held
    from codemode.workflows.tool_calls import CallRecords, run_call
    from codemode.workflows.undo import Undo
    from codemode.workflows.undo_run import rollback_execution, settle, stopped
    from codemode.workflows.usage import UsageMeter
    from codemode.workflows.versions import GENERATION_49, Versions

#: What a tool's activity gives the step after its call before leaving it to the workflow's
#: own step (which redoes it from the checkpoint; the tool never runs again). It is added to
#: the tool's timeout, so it is also what a lost worker adds to noticing a lost call: short.
FUSED_STEP_SECONDS = 10.0
#: Deferred checkpoints (issue 11): a snapshot step may leave its checkpoint unsaved and keep the
#: run live on its worker while the journal since the last saved one stays under these bounds
#: (and ``activities.step_loop.DEFER_SECONDS`` of run time). A worker without the live run leaves
#: the step to the workflow, which rebuilds the run from the checkpoint and the journal it holds.
DEFER_ENTRIES = 32
DEFER_BYTES = 256 * 1024
#: Our own ceilings for one run, far below the server's hard limits (51,200 events, 50 MB).
MAX_RUN_EVENTS = 10_000
MAX_RUN_BYTES = 10 * 1024 * 1024


@workflow.defn(name=WORKFLOW_TYPE)
class CodeExecutionWorkflow:
    def __init__(self) -> None:
        #: The changes this run takes, read first thing (``workflows/versions.py``).
        self._versions = Versions()
        self._versions.begin()
        self._state: ExecutionState = "running"
        self._runtime = "monty"
        self._calls = CallRecords()
        self._approvals = Approvals(self._set_state, self._versions)
        self._journal: list[JournalEntry] = []
        self._stdout: list[str] = []
        self._stdout_len = 0
        self._error: ErrorInfo | None = None
        self._index = True
        self._runs: list[str] = []
        self._code_approval: ApprovalRecord | None = None
        self._held = Held()
        self._started: datetime | None = None
        #: The journal and records of earlier runs, in the store (see workflows/continuation.py).
        self._segments: list[SegmentRef] = []
        self._determinism: Determinism | None = None
        self._req = CodeExecutionRequest(code="")
        #: A cell of a session (``req.cell``): where its steps save the session, and the
        #: session after the cell (from the step that ended it).
        self._cell: CellRef | None = None
        self._cell_end: CellEnd | None = None
        self._deferred = DeferredTail()
        self._usage = UsageMeter(self._runtime)
        self._parking = Parking(self._usage, self._versions)
        #: The log of applied calls and its rollback (issue 47; ``workflows/undo.py``).
        self._undo = Undo(self._versions, self._approvals)
        self._snippets = SnippetState(self._versions)

    # -- handlers -----------------------------------------------------------------------

    @workflow.signal(
        description='Approve a tool call waiting for approval: {"call_id": "1", "by": "your name", '
        '"comment": "optional"}. call_id may be left out when one call is pending.'
    )
    def approve(self, payload: RawValue = None) -> None:  # type: ignore[assignment]
        self._approvals.on_signal("approve", decision_input("approve", payload))

    @workflow.signal(
        description='Deny a tool call waiting for approval: {"call_id": "1", "by": "your name", '
        '"reason": "optional"}. The code gets PermissionError.'
    )
    def deny(self, payload: RawValue = None) -> None:  # type: ignore[assignment]
        self._approvals.on_signal("deny", decision_input("deny", payload))

    @workflow.update(description="Approve or deny a pending call and get the recorded decision back at once.")
    async def decide(self, decision: Decision) -> ApprovalRecord:
        await self._approvals.hold_update(decision)  # a call that does not wait yet: until it does
        return await self._approvals.decide_update(decision)

    @decide.validator
    def _validate_decide(self, decision: Decision) -> None:
        self._approvals.validate_decide(decision)

    @workflow.update(description="Roll the run back: stop its code, then compensate its calls, newest first.")
    async def rollback(self, request: RollbackRequest) -> UndoLog:
        self._undo.stop(RollbackInfo(trigger="request", **request.model_dump()))
        await workflow.wait_condition(lambda: self._undo.rollback is not None and self._undo.rollback.finished)
        return self._undo.view()

    @rollback.validator
    def _validate_rollback(self, request: RollbackRequest) -> None:
        self._undo.validate(request)

    @workflow.query
    def undo_log(self) -> UndoLog:
        """The log of applied calls and what a rollback did with each (read after the run ended)."""
        return self._undo.view()

    @workflow.query
    def status(self, since: int | None = None) -> ExecutionStatus:
        """The state, pending approvals, stdout and a page of the calls: from index ``since``,
        or the last ``STATUS_PAGE`` calls when it is not given."""
        earlier = self._earlier_calls  # in stored segments: `codemode history` has them
        page, calls_from = self._calls.page(since, earlier)
        return ExecutionStatus(
            state=self._state,
            runtime=self._runtime,
            pending_approvals=self._undo.shown(sorted(self._approvals.pending.values(), key=lambda p: call_order(p.call_id))),
            tool_calls=page,
            calls_from=calls_from,
            call_count=earlier + len(self._calls.by_id),
            stdout="".join(self._stdout),
            error=self._error,
            runs=len(self._runs) + 1,
            ignored_signals=list(self._approvals.ignored),
            held_decisions=self._approvals.held_decisions(),
            undo=self._undo.shown_log(),
        )

    @workflow.query(name=SANDBOX_HELD_QUERY)
    def sandbox_held(self) -> HeldSandbox:
        """The latest checkpoint: the sandbox sweep asks which sandbox it names."""
        info = workflow.info()
        return HeldSandbox(
            runtime=self._runtime, first_run_id=info.first_execution_run_id, checkpoint=self._held.checkpoint
        )

    @property
    def _earlier_calls(self) -> int:
        return sum(s.calls for s in self._segments)

    # -- the run ------------------------------------------------------------------------

    @workflow.run
    async def run(self, req: CodeExecutionRequest, carry: Continuation | None = None) -> ExecutionOutcome:
        # A client starts the execution with the request alone; the SDK only applies type
        # hints when the argument count matches them, so the one-argument start arrives as JSON.
        if not isinstance(req, CodeExecutionRequest):
            req = CodeExecutionRequest.model_validate(req)
        info = workflow.info()
        self._req = req
        self._approvals.begin(req)  # the code (for notices) and who started it (four-eyes rules)
        self._runtime = req.runtime
        self._usage = UsageMeter(req.runtime, carry.usage if carry else None)
        self._parking = Parking(self._usage, self._versions)
        self._index = req.index_search_attributes
        self._started = started = carry.started_at if carry else workflow.now()
        if carry is not None:
            self._runs = list(carry.runs)
            self._calls = CallRecords(carry.calls, carry.record_bytes)
            self._segments = list(carry.segments)
            self._journal = list(carry.journal)
            self._stdout = [carry.stdout] if carry.stdout else []
            self._stdout_len = len(carry.stdout)
            self._code_approval = carry.code_approval
            self._approvals.ignored = list(carry.ignored_signals)
            self._approvals.checks.pinned = carry.approvers_sha256 if self._approvals.strict else None
            self._undo.restore(carry.undo)
            # A deferred step's tail rode in carry.journal (see _roll_over).
            self._deferred.stdout_at_base, self._deferred.tail_bytes = carry.base_stdout, carry.tail_bytes
        elif self._index and not indexed_at_start(req.runtime):
            workflow.upsert_search_attributes([STATUS_KEY.value_set("running"), RUNTIME_KEY.value_set(req.runtime)])
        if req.rollback_of is not None and self._undo.on:  # a rollback of a run that has ended
            return await rollback_execution(req, self._undo, self._set_state)
        start = StartInput(
            execution_id=info.workflow_id,
            runtime=req.runtime,
            code=req.code,
            inputs=req.inputs,
            tools=req.tools,
            limits=req.limits,
            first_run_id=info.first_execution_run_id,
            # One seed and clock for the whole execution (the first run's), so a replay of
            # the code in a fresh sandbox draws the same numbers and reads the same time; a
            # cell has its session's.
            determinism=req.cell.determinism if req.cell else carry.determinism if carry else Determinism(
                seed=workflow.random().getrandbits(63), epoch=workflow.now().timestamp()
            ),
            defer_bytes=DEFER_BYTES if req.runtime in LOCAL_STEP_RUNTIMES else 0,
            options=req.sandbox_options(),
            cell=req.cell,
            snippets=req.snippets,
        )
        self._snippets = SnippetState(self._versions, carry)
        self._snippets.begin(start)
        if req.cell is not None:
            self._cell = CellRef(scope=req.cell.scope, state=req.cell.state)
        self._determinism = start.determinism
        try:
            success, output, error = await self._execute(req, start, carry)
        except asyncio.CancelledError:
            self._set_state("cancelled")
            for record in self._calls.by_id.values():
                if record.status in ("pending", "running", "awaiting_approval"):
                    record.status = "cancelled"
            self._approvals.pending.clear()
            self._approvals.close("the run was cancelled before the call waited for a decision")
            self._approvals.show_pending(start.execution_id)
            reason = workflow.cancellation_reason()
            workflow.set_current_details(f"**Cancelled**{': ' + reason if reason else ''}")
            await self._release(start)
            if await settle(self._undo, req, self._set_state, failed=True, cause="cancelled"):
                self._set_state("cancelled")
                await workflow.wait_condition(workflow.all_handlers_finished)  # (approvals closed above)
            raise
        self._error = error
        final: ExecutionState = "completed" if success else "timed_out" if error and error.kind == "timeout" else "failed"
        self._set_state("rolling_back" if self._undo.requested else final)
        workflow.set_current_details(final_details(success, error, workflow.now() - started, len(self._calls.by_id)))
        await self._release(start)
        if await settle(self._undo, req, self._set_state, failed=not success, cause=error):
            assert self._undo.rollback is not None
            self._set_state(final if self._undo.rollback.trigger == "on_failure" else "rolled_back")
        await self._approvals.notices.settled()
        await self._close_approvals("the run ended before the call waited for a decision")
        if self._cell_end is not None and self._cell_end.effect == "kept":
            await store_cell_journal(start, self._segments, self._journal, self._cell_end)
        return ExecutionOutcome(
            execution_id=info.workflow_id,
            runs=len(self._runs) + 1,
            success=success,
            output=output,
            stdout="".join(self._stdout),
            error=error,
            tool_calls=(calls := await all_calls(start, self._segments, list(self._calls.by_id.values()))),
            duration_ms=(workflow.now() - started).total_seconds() * 1000,
            runtime=req.runtime,
            cell=self._cell_end,
            artifacts=artifacts_of(calls, start.first_run_id),
            usage=self._usage.by_runtime(),
            undo=self._undo.shown_log(),
            snippets=self._snippets.uses,
        )

    async def _execute(
        self, req: CodeExecutionRequest, start: StartInput, carry: Continuation | None
    ) -> tuple[bool, object, ErrorInfo | None]:
        """Drive the code to its end: ``(success, output, error)``."""
        local = req.runtime in LOCAL_STEP_RUNTIMES
        timeout = timedelta(seconds=req.limits.timeout_seconds + 60)
        if carry is not None:
            cursor = carry.cursor  # its step was recorded by the run before
            self._held = Held.after(cursor.step, cursor.superseded)  # released when the run ends
            self._approvals.step_taken(cursor.remaining)
        else:
            if req.require_code_approval:
                self._code_approval = await self._approvals.review_code(req.code, req.approval_timeout)
                if self._code_approval.decision != "approved":
                    return False, None, permission_error("the code", self._code_approval)
            local_start = local or (req.runtime in LOCAL_START_RUNTIMES and self._versions.since(GENERATION_49))
            step = await self._start(start, local=local_start, timeout=timeout)
            self._snippets.first_step(step, start)
            if step.hash_seed is not None and start.determinism is not None:  # a warm interpreter's
                start.determinism = self._determinism = start.determinism.with_hash_seed(step.hash_seed)
            cursor = self._take(step, superseded=None)
        #: The step in hand came from a tool's activity (so no rollover check preceded it).
        fused_before = False
        while True:
            step = cursor.step
            if (stop := stopped(self._undo)) is not None:  # rolled back: the code goes no further
                return False, None, stop
            if step.kind == "result":
                assert step.result is not None
                return True, step.result.output, None
            if step.kind == "error":
                return False, None, step.error
            if can_fuse(cursor, local):
                # The step waits for one call: its tool activity runs the step after it too.
                # A history written before this existed has no step in any tool's result, so
                # it replays on the path below (the workflow's own resume step), unpatched.
                if fused_before and self._should_roll_over():  # else checked before the step
                    await self._roll_over(req, cursor)
                call = cursor.remaining[0]
                tail = len(self._journal) - self._deferred.base_index if step.live else 0
                deferrable = self._deferred.ok and tail < DEFER_ENTRIES and not step.session_id
                then = NextStep(
                    runtime=req.runtime,
                    first_run_id=start.first_run_id,
                    checkpoint=step.checkpoint,
                    superseded=cursor.superseded if cursor.superseded != step.checkpoint else None,
                    tools=req.tools,
                    stdout_offset=self._stdout_len,
                    step_timeout=min(timeout.total_seconds(), FUSED_STEP_SECONDS),
                    live=step.live,
                    tail_entries=tail,
                    defer_bytes=DEFER_BYTES - self._deferred.tail_bytes if deferrable else 0,
                    cell=self._cell,
                    session_id=step.session_id,
                    prelude=self._snippets.prelude,
                )
                workflow.set_current_details(f"Running `{summary(call)}`")
                answer, fused = await self._run_call(call, req.approval_timeout, then=then)
                cursor.remaining = []
                cursor.answers.append(answer)
                self._journal.append(answer)
                fused_before = fused is not None
                if fused is None and step.live and answer.error_type is None:
                    self._deferred.ok = False  # the live run was on another worker: save from now on
                if fused is not None:
                    cursor = self._take(fused, superseded=step.checkpoint)
                    continue
            #: Whether an activity ran since the step: the history length and the server's
            #: suggestion are read only then. Right after a local step they are not the same on
            #: replay (which may take the step's result in a task earlier: workflows/versions.py).
            settled = bool(cursor.answers) or bool(cursor.remaining) or not local
            while cursor.remaining:
                width = call_window(len(cursor.remaining), self._versions)
                window, cursor.remaining = cursor.remaining[:width], cursor.remaining[width:]
                workflow.set_current_details("Running " + ", ".join(f"`{summary(c)}`" for c in window[:5]))
                answers = [a for a, _ in await asyncio.gather(*(self._run_call(c, req.approval_timeout) for c in window))]
                cursor.answers.extend(answers)
                self._journal.extend(answers)
                if self._undo.requested:
                    break
                if cursor.remaining and self._should_roll_over():
                    await self._roll_over(req, cursor)
            if (stop := stopped(self._undo)) is not None:
                return False, None, stop
            if (settled or not self._versions.current) and self._should_roll_over():
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
                live=step.live,
                cell=self._cell,
                prelude=self._snippets.prelude,
            )
            if step.live and step.checkpoint is not None:  # the live run, or the checkpoint and entries since
                tail_list = self._journal[self._deferred.base_index : len(self._journal) - len(cursor.answers)]
                resume.tail, resume.tail_entries = tail_list, len(tail_list)
                resume.base_stdout = self._stdout_len - self._deferred.stdout_at_base
            elif step.checkpoint is None and step.session_id is None:  # nothing to continue from
                resume = self._with_journal(resume, start, "the previous step left no checkpoint")
            step = await self._resume(resume, cursor.step, start, local=local, timeout=timeout)
            cursor = self._take(step, superseded=resume.checkpoint)
            fused_before = False

    def _step_begins(self) -> None:
        self._usage.step_began()
        self._approvals.step_began()  # it may ask for calls nobody saw yet: decisions for them wait

    def _take(self, step: StepResult, superseded: CheckpointRef | None) -> Cursor:
        """Record a step's outcome; the cursor that works through its calls."""
        self._approvals.step_taken(step.calls)  # decisions held for calls it did not ask: refused
        self._absorb(step)
        self._usage.step_ended(step.via, step.holds_compute, more=step.kind == "calls")
        if step.cell is not None:
            self._cell_end = step.cell
        if step.deferred:  # the code ran on live; the checkpoint is still the one before
            step.checkpoint = superseded
            self._deferred.tail_bytes += step.deferred
        else:  # saved (or finished): the journal tail starts here
            tail = self._deferred
            tail.base_index, tail.stdout_at_base, tail.tail_bytes = len(self._journal), self._stdout_len, 0
        self._held = Held.after(step, superseded)
        return Cursor(step=step, remaining=list(step.calls), superseded=superseded)

    # -- continue-as-new ------------------------------------------------------------------

    def _should_roll_over(self) -> bool:
        if self._approvals.pending:
            return False  # never while a person is deciding: the run is parked, its history idle
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > MAX_RUN_EVENTS
            or info.get_current_history_size() > MAX_RUN_BYTES
        )

    async def _close_approvals(self, why: str) -> None:
        """No held decision can apply any more (``why``); in a run of this generation, let the
        Updates held for a call answer before the run ends (an unfinished handler is lost)."""
        self._approvals.close(why)
        if self._versions.current:
            await workflow.wait_condition(workflow.all_handlers_finished)

    async def _roll_over(self, req: CodeExecutionRequest, cursor: Cursor) -> NoReturn:
        if self._versions.current:
            await self._close_approvals("the run continued as new before the call waited for a decision")
        await workflow.wait_condition(workflow.all_handlers_finished)
        await self._approvals.notices.settled()
        assert self._started is not None
        # A deferred step's tail (the journal entries since its checkpoint) rides along in the
        # carry, so the next run can still rebuild the live run; everything before is stored.
        keep = self._journal[self._deferred.base_index :] if cursor.step.live else []
        if keep:
            self._journal = self._journal[: self._deferred.base_index]
        if self._calls.by_id or self._journal:  # every record is final here: nothing runs, nobody decides
            self._segments.append(await store_run(self._journal, list(self._calls.by_id.values())))
            self._journal, self._calls = [], CallRecords(record_bytes=self._calls.record_bytes)
        self._journal = keep
        carry = Continuation(
            started_at=self._started,
            runs=[*self._runs, workflow.info().run_id],
            segments=self._segments,
            record_bytes=self._calls.record_bytes,
            calls=list(self._calls.by_id.values()),
            journal=self._journal,
            stdout="".join(self._stdout),
            code_approval=self._code_approval,
            ignored_signals=self._approvals.ignored,
            approvers_sha256=self._approvals.checks.pinned,
            determinism=self._determinism,
            cursor=cursor,
            base_stdout=self._deferred.stdout_at_base,
            tail_bytes=self._deferred.tail_bytes,
            usage=self._usage.snapshot(),
            undo=self._undo.view() if self._undo.on else None,
            snippets=self._snippets.uses,
            prelude=self._snippets.prelude,
        )
        workflow.continue_as_new(args=[req, carry])

    # -- steps ------------------------------------------------------------------------------

    async def _start(self, start: StartInput, *, local: bool, timeout: timedelta) -> StepResult:
        """The first step. A cell whose session a worker keeps live goes to that worker's
        queue first; if it is gone, any worker rebuilds the session (its state, or a replay)."""
        self._step_begins()
        cell = start.cell
        if cell is not None and cell.live and cell.live_queue:
            try:
                return await step_on_own_queue(names.SANDBOX_START, start, cell.live_queue, timeout=timeout)
            except ActivityError as err:
                workflow.logger.info("the session's live sandbox is unavailable (%s); rebuilding it", why_not_live(err))
                start = start.model_copy(update={"cell": cell.model_copy(update={"live": None, "live_queue": None})})
        return await self._step(names.SANDBOX_START, start, local=local, timeout=timeout)

    async def _step(self, name: str, arg: object, *, local: bool, timeout: timedelta) -> StepResult:
        try:
            return await run_step(name, arg, local=local, timeout=timeout)
        except (ActivityError, ApplicationError) as err:
            raise self._sandbox_failure(name, err) from err

    def _sandbox_failure(self, name: str, err: ActivityError | ApplicationError) -> ApplicationError:
        self._set_state("failed")
        cause = step_cause(err)
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
                "journal_segments": list(self._segments),
                "journal": list(self._journal),
                "replay_reason": reason,
            }
        )

    async def _resume(
        self, inp: ResumeInput, previous: StepResult, start: StartInput, *, local: bool, timeout: timedelta
    ) -> StepResult:
        if (released := await self._parking.settle()) is not None:
            inp = self._with_journal(inp, start, released)  # the parked sandbox is gone: replay
        self._step_begins()
        if inp.session_id and previous.session_queue:
            try:
                return await step_on_own_queue(names.SANDBOX_RESUME, inp, previous.session_queue, timeout=timeout)
            except ActivityError as err:
                reason = why_not_live(err)
                workflow.logger.info("live sandbox unavailable (%s); replaying the journal", reason)
                inp = self._with_journal(inp, start, reason)
        elif inp.checkpoint is not None or inp.live:
            # (a deferred run without a checkpoint sends the journal since the start, which
            # the tail bounds: a local activity, so it is not copied into the history)
            try:
                return await run_step(names.SANDBOX_RESUME, inp, local=local, timeout=timeout)
            except (ActivityError, ApplicationError) as err:
                cause = step_cause(err)
                if not (isinstance(cause, ApplicationError) and cause.type in (CHECKPOINT_REFUSED, SESSION_GONE)):
                    raise self._sandbox_failure(names.SANDBOX_RESUME, err) from err
                workflow.logger.warning("checkpoint refused (%s); replaying the journal", cause.message)
                inp = self._with_journal(inp, start, cause.message)
        return await self._step(names.SANDBOX_RESUME, inp, local=False, timeout=timeout)

    async def _release(self, start: StartInput) -> None:
        """Free what the sandbox layer still holds for this execution (its last checkpoint, a
        live process, a cloud sandbox). Best effort: the sandbox sweep frees a leftover."""
        self._parking.cancel()
        self._usage.ended()
        held, self._held = self._held, Held()
        if (inp := held.release_input(start)) is not None:
            await release_sandbox(inp, held.session[1] if held.session else None)

    def _absorb(self, step: StepResult) -> None:
        if step.stdout:
            self._stdout.append(step.stdout)
            self._stdout_len += len(step.stdout)
        for entry, record in answered_in_step(step):  # refused calls, save_artifact
            self._journal.append(entry)
            self._calls.by_id[entry.call_id] = record

    # -- one call ------------------------------------------------------------------------------

    async def _run_call(
        self, call: CallRequest, approval_timeout: timedelta, then: NextStep | None = None
    ) -> tuple[JournalEntry, StepResult | None]:
        """One call, approved if it must be, run (``workflows/tool_calls.py``)."""
        cell = self._cell is not None  # parked after the approvers file's policy, which may decide alone
        park = partial(self._parking.park, self._held, self._runtime, self._approvals.waiting, cell=cell)
        return await run_call(
            call,
            approval_timeout,
            then,
            records=self._calls,
            approvals=self._approvals,
            park=park,
            step_begins=self._step_begins,
            undo=self._undo,
        )

    def _set_state(self, state: ExecutionState) -> None:
        if state == self._state:
            return
        self._state = state
        if self._index:
            workflow.upsert_search_attributes([STATUS_KEY.value_set(state)])

