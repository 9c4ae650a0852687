"""A session's answers to the workflows that send it cells (workflows cannot send Updates: they
signal ``enqueue`` and get the signal ``codemode_cell_reply`` back). Workflow code of
``CodeSessionWorkflow``: deterministic."""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.records import ErrorInfo
    from codemode.workflows.models import ExecutionOutcome
    from codemode.workflows.session_models import CELL_REPLY_SIGNAL, CellReply, QueuedCell, cell_execution_id


async def send_reply(to: str, reply: CellReply) -> None:
    try:
        await workflow.get_external_workflow_handle(to).signal(CELL_REPLY_SIGNAL, reply)
    except FailureError as err:  # the sender is gone (it closed): nobody to tell
        workflow.logger.info("could not answer %s about cell %s: %s", to, reply.index, err)


def duplicate(session: str, request_id: str, index: int) -> CellReply:
    """The answer to a request sent again after its cell ran (and its answer was let go)."""
    return CellReply(
        request_id=request_id,
        session=session,
        index=index,
        execution_id=cell_execution_id(session, index),
        state="refused",
        error=ErrorInfo(
            type="DuplicateCell",
            message=f"request {request_id} already ran as cell {index}: its outcome is "
            f"the result of execution {cell_execution_id(session, index)}",
            kind="sandbox",
        ),
    )


def refused(session: str, request_id: str, type_: str | None, message: str) -> CellReply:
    return CellReply(
        request_id=request_id,
        session=session,
        state="refused",
        error=ErrorInfo(type=type_ or "SessionError", message=message, kind="sandbox"),
    )


def ended(session: str, queued: QueuedCell, outcome: ExecutionOutcome | None, closed_reason: str | None) -> CellReply:
    """How a cell sent by a workflow ended."""
    assert queued.request_id is not None
    record = queued.record
    error = record.error if outcome is None else None
    if outcome is None and record.state == "dropped":
        error = ErrorInfo(
            type="SessionClosed",
            message=f"session {session!r} closed before cell {record.index} ran ({closed_reason})",
            kind="sandbox",
        )
    return CellReply(
        request_id=queued.request_id,
        session=session,
        index=record.index,
        execution_id=record.execution_id,
        state=record.state,
        outcome=outcome,
        error=error,
    )
