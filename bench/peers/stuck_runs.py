"""A run that gave no result in time, in both environments of the peers benchmark (ours and the
peer's ``tah_worker``): why it stalled, then terminated. Imports only temporalio."""

from __future__ import annotations

import contextlib

from temporalio.client import Client


async def stuck(client: Client, wid: str) -> str:
    """Why a run gave no result in time (its last failed workflow task), after terminating it
    so it costs the next tests nothing."""
    handle = client.get_workflow_handle(wid)
    why = ""
    with contextlib.suppress(Exception):
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_task_failed_event_attributes"):
                why = event.workflow_task_failed_event_attributes.failure.message
            elif event.HasField("workflow_task_timed_out_event_attributes"):
                why = "a workflow task timed out"
    with contextlib.suppress(Exception):
        await handle.terminate("the benchmark gave up on it")
    return f" (terminated; last workflow task failure: {why[:300]})" if why else " (terminated)"
