"""Each tool call of a running execution as it ends, read from the execution's history as the
server records it: a long poll of the history, which the server answers. No worker is asked.

A status query asks the worker that runs the execution, so each look costs that worker and
the server a round trip, and a look that races the run's end makes the SDK core log ``Query
not found when attempting to respond to it`` on the worker. Following a run's calls this way
costs neither: the history is what the audit (``worker/audit.py``) is folded from, one event
at a time, and a call is reported when its activity completes, fails or times out.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from temporalio.client import Client

from codemode.worker.audit import CallAudit, audit_builder

_ENDED = (
    "activity_task_completed_event_attributes",
    "activity_task_failed_event_attributes",
    "activity_task_timed_out_event_attributes",
)


async def ended_calls(client: Client, execution_id: str, run_id: str | None = None) -> AsyncIterator[CallAudit]:
    """Each tool call of the execution (from run ``run_id`` on: None, the latest) as its
    activity ends, through the runs it continues as, until the execution closes."""
    builder = audit_builder(execution_id, client.data_converter)
    while True:
        handle = client.get_workflow_handle(execution_id, run_id=run_id)
        next_run: str | None = None
        async for event in handle.fetch_history_events(wait_new_event=True):
            kind = event.WhichOneof("attributes")
            if kind == "workflow_execution_continued_as_new_event_attributes":
                next_run = event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
                continue
            await builder.feed(event)
            if kind in _ENDED:
                scheduled = getattr(event, kind).scheduled_event_id
                _, call_id = builder.activities.get((builder.run, scheduled), ("", None))
                if call_id is not None:
                    yield builder.calls[call_id]
        if next_run is None:
            return
        run_id, builder.run = next_run, builder.run + 1
