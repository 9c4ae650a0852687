"""When a run rolls back (issue 47): after its code stopped, and as a run of its own for a run
that has ended.

* In the run: "deny and roll back" on a waiting call, or the ``rollback`` Update, stops the code
  at its next step boundary (calls that wait are withdrawn; calls already running finish, so
  their results enter the log), the sandbox is released, and the log is rolled back. With
  ``on_failure="compensate"`` the same happens after an uncaught error, a timeout or a
  cancellation. The outcome says what was compensated.
* After the run ended: a rollback is an execution of its own (id ``rollback:ID``, the same
  workflow type, so every door, the inbox, ``status`` and ``history`` work on it as on any run)
  that runs no code: it reads the ended run's log (``activities/undo_log_reader.py``: a query the
  server answers by replaying that run's history) and rolls it back. Why not keep the ended run
  open for a rollback window instead: its outcome would wait for the window to close, and every
  caller waits for the outcome; a run of its own costs nothing until someone asks.

Workflow code: deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.undo_records import SETTLED, ReadUndoLog, RollbackInfo, UndoLog
    from codemode.workflows.models import CodeExecutionRequest, ErrorInfo, ExecutionOutcome, ExecutionState
    from codemode.workflows.undo import Undo

#: Workflow ids of rollbacks of ended runs: ``rollback:<execution id>``.
ROLLBACK_PREFIX = "rollback:"
READ_TIMEOUT = timedelta(seconds=120)
READ_RETRY = RetryPolicy(
    maximum_attempts=5, initial_interval=timedelta(seconds=1), non_retryable_error_types=["RollbackRefused"]
)


def rollback_id(execution_id: str) -> str:
    return ROLLBACK_PREFIX + execution_id


def stopped(undo: Undo) -> ErrorInfo | None:
    """The run's error when a rollback stopped its code (None: nobody asked for one)."""
    info = undo.rollback
    if info is None or info.trigger == "on_failure":
        return None
    by = f" by {info.by}" if info.by else ""
    why = f": {info.reason}" if info.reason else ""
    if info.trigger == "deny":
        return ErrorInfo(
            type="PermissionError",
            message=f"call {info.call_id} was denied{by} and the run rolled back{why}",
            kind="denied",
        )
    return ErrorInfo(type="RolledBack", message=f"the run was rolled back{by}{why}", kind="rolled_back")


async def settle(
    undo: Undo,
    req: CodeExecutionRequest,
    set_state: Callable[[ExecutionState], None],
    *,
    failed: bool,
    cause: ErrorInfo | str | None,
) -> bool:
    """After the code stopped: roll back when someone asked, or when it ``failed`` and the request
    says ``on_failure="compensate"`` (``cause``: what ended it). From here on no rollback is
    accepted (``codemode rollback`` then starts a rollback of its own). Whether it rolled back.
    (The caller lets the rollback Updates answer, once no held decision can wait any more.)"""
    if not undo.on:
        return False
    if not undo.requested and failed and req.on_failure == "compensate" and undo.would_compensate():
        why = f"{cause.type}: {cause.message}"[:300] if isinstance(cause, ErrorInfo) else cause
        undo.request(RollbackInfo(trigger="on_failure", reason=why, order=req.compensation_order))
    undo.closed = True
    if not undo.requested:
        return False
    await undo.roll_back(workflow.info().workflow_id, req.approval_timeout, set_state)
    return True


async def rollback_execution(
    req: CodeExecutionRequest, undo: Undo, set_state: Callable[[ExecutionState], None]
) -> ExecutionOutcome:
    """A run whose request is ``rollback_of``: read the ended run's log, and roll it back."""
    of = req.rollback_of
    assert of is not None
    started = workflow.now()
    info = workflow.info()
    log: UndoLog = await workflow.execute_activity(
        names.READ_UNDO_LOG,
        ReadUndoLog(execution_id=of.execution_id, rollback_id=info.workflow_id, previous_run=of.previous_run),
        result_type=UndoLog,
        start_to_close_timeout=READ_TIMEOUT,
        retry_policy=READ_RETRY,
        summary=f"read what {of.execution_id} applied",
    )
    undo.restore(log)
    undo.of_execution = of.execution_id
    ask = of.request
    undo.request(RollbackInfo(trigger="request", by=ask.by or None, reason=ask.reason, door=ask.door, order=ask.order))
    undo.closed = True
    await undo.roll_back(of.execution_id, req.approval_timeout, set_state)
    left = [e for e in undo.entries.values() if e.state not in SETTLED]
    error = None
    if left:
        which = ", ".join(f"call {e.call_id} ({e.state})" for e in left)
        error = ErrorInfo(type="RollbackIncomplete", message=f"not everything was undone: {which}", kind="rolled_back")
    set_state("rolled_back" if not left else "failed")
    await undo.approvals.notices.settled()
    undo.approvals.close("the rollback ended before the call waited for a decision")
    await workflow.wait_condition(workflow.all_handlers_finished)
    return ExecutionOutcome(
        execution_id=info.workflow_id,
        success=not left,
        error=error,
        duration_ms=(workflow.now() - started).total_seconds() * 1000,
        runtime=req.runtime,
        undo=undo.view(),
    )
