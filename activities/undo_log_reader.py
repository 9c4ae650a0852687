"""Reading the log of applied calls of a run that has ended (issue 47).

A rollback after the run ended is an execution of its own (``rollback:ID``, ``workflows/undo_run.py``)
that runs no code. Its first step is this activity: it asks the ended run its ``undo_log`` query.
The server answers a query on a closed workflow by having a worker replay its history, so the
log is the run's own state at its end, however it ended (completed, failed, cancelled,
terminated), rebuilt from the history rather than from anything a client sends. An earlier
rollback of the same run is asked too: what it compensated stays compensated.
"""

from __future__ import annotations

from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.exceptions import ApplicationError

from . import names
from .undo_records import SETTLED, ReadUndoLog, UndoLog

UNDO_LOG_QUERY = "undo_log"


@activity.defn(name=names.READ_UNDO_LOG)
async def read_undo_log(inp: ReadUndoLog) -> UndoLog:
    client = activity.client()
    handle = client.get_workflow_handle(inp.execution_id)
    try:
        desc = await handle.describe()
    except Exception as err:  # noqa: BLE001 - not found (or gone past retention)
        raise ApplicationError(
            f"execution {inp.execution_id} cannot be read: {err}", type="RollbackRefused", non_retryable=True
        ) from None
    if desc.status == WorkflowExecutionStatus.RUNNING:
        raise ApplicationError(
            f"execution {inp.execution_id} is still running: its own rollback Update rolls it back",
            type="RollbackRefused",
            non_retryable=True,
        )
    log = await handle.query(UNDO_LOG_QUERY, result_type=UndoLog)
    previous = inp.previous_run
    if inp.rollback_id and previous is None:  # (a session's rollback does not know it: look)
        previous = await _latest_closed(client, inp.rollback_id)
    if inp.rollback_id and previous:
        earlier = await client.get_workflow_handle(inp.rollback_id, run_id=previous).query(
            UNDO_LOG_QUERY, result_type=UndoLog
        )
        done = {e.call_id: e for e in earlier.entries if e.state in SETTLED}
        log.entries = [done.get(e.call_id, e) for e in log.entries]
    log.rollback = None
    return log


async def _latest_closed(client: Client, workflow_id: str) -> str | None:
    """The run id of the latest closed run of ``workflow_id`` (None: it never ran before)."""
    latest = None
    async for wf in client.list_workflows(f'WorkflowId = "{workflow_id}" AND ExecutionStatus != "Running"'):
        if latest is None or (wf.close_time and latest.close_time and wf.close_time > latest.close_time):
            latest = wf
    return latest.run_id if latest is not None else None
