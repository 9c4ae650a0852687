"""Each tool call of a running execution as it ends, and what the code printed, read from the
execution's history as the server records it: the server answers. No worker is asked.

A status query asks the worker that runs the execution, so each look costs that worker and
the server a round trip, and a look that races the run's end makes the SDK core log ``Query
not found when attempting to respond to it`` on the worker. Following a run's calls from its
history costs neither. Only what a follower shows is decoded: a call's summary when its
activity is scheduled and its result or failure when it ends (``display.call_line``), and
the output each sandbox step reports; the audit (``client/histories/audit.py``) reads the same events
in full.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client

from codemode.activities import names
from codemode.activities.models import StepResult, ToolOutput
from codemode.activities.records import ToolCallRecord
from codemode.client.histories.audit import LOCAL_ACTIVITY_MARKER, PayloadDecoder, tool_error

#: Tool activities are scheduled with this id prefix before the call id (``run_tool``).
CALL_ACTIVITY_PREFIX = "call-"
#: The sandbox steps whose results report what the code printed.
STEP_NAMES = frozenset({names.SANDBOX_START, names.SANDBOX_RESUME})
#: Seconds between looks at the history (what a status query's poll waited too).
LOOK_SECONDS = 0.3


async def ended_calls(
    client: Client, execution_id: str, run_id: str | None = None, *, every: float = LOOK_SECONDS
) -> AsyncIterator[ToolCallRecord | str]:
    """Each tool call of the execution (from run ``run_id`` on: None, the latest) as its
    activity completes, fails or times out, and each piece of output the code printed (a
    ``str``: what a sandbox step added), in the order the history records them, through the
    runs it continues as, until the execution closes. One look at the history every
    ``every`` seconds at most: what was recorded meanwhile comes in one page (a look for each
    new event cost the server more than the status queries this replaces)."""
    decode = PayloadDecoder(client.data_converter)
    while True:
        scheduled: dict[int, ToolCallRecord] = {}  # event ids restart in every run
        steps: set[int] = set()
        next_run: str | None = None
        token = b""
        while True:
            page = await client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=execution_id, run_id=run_id or ""),
                    next_page_token=token,
                    wait_new_event=True,
                )
            )
            for e in page.history.events:
                kind = e.WhichOneof("attributes")
                if kind == "activity_task_scheduled_event_attributes":
                    attrs = e.activity_task_scheduled_event_attributes
                    if attrs.activity_id.startswith(CALL_ACTIVITY_PREFIX):
                        tool = attrs.activity_type.name
                        has_summary = e.user_metadata.HasField("summary")
                        summary = await decode([e.user_metadata.summary], str) if has_summary else ""
                        scheduled[e.event_id] = ToolCallRecord(
                            call_id=attrs.activity_id.removeprefix(CALL_ACTIVITY_PREFIX),
                            tool=tool,
                            summary=summary if isinstance(summary, str) and summary else f"{tool}(...)",
                            status="running",
                        )
                    elif attrs.activity_type.name in STEP_NAMES:
                        steps.add(e.event_id)
                elif kind == "activity_task_completed_event_attributes":
                    attrs = e.activity_task_completed_event_attributes
                    call = scheduled.pop(attrs.scheduled_event_id, None)
                    if call is not None:
                        out = await decode(attrs.result, ToolOutput)
                        call.status = "ok"
                        if isinstance(out, ToolOutput):
                            call.result, call.attempts = out.result(), out.attempt
                        yield call
                        if isinstance(out, ToolOutput) and out.step is not None and out.step.stdout:
                            yield out.step.stdout  # the step the tool's activity ran after the call
                    elif attrs.scheduled_event_id in steps:
                        step = await decode(attrs.result, StepResult)
                        if isinstance(step, StepResult) and step.stdout:
                            yield step.stdout
                elif kind == "marker_recorded_event_attributes":
                    printed = await _local_step_output(e.marker_recorded_event_attributes, decode)
                    if printed:
                        yield printed
                elif kind in ("activity_task_failed_event_attributes", "activity_task_timed_out_event_attributes"):
                    attrs = getattr(e, kind)
                    call = scheduled.pop(attrs.scheduled_event_id, None)
                    if call is not None:
                        call.status, call.error = "error", tool_error(await decode.failure(attrs.failure))
                        yield call
                elif kind == "workflow_execution_continued_as_new_event_attributes":
                    next_run = e.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            token = page.next_page_token
            if not token:  # the run closed
                break
            await asyncio.sleep(every)
        if next_run is None:
            return
        run_id = next_run


async def _local_step_output(marker: Any, decode: Any) -> str:
    """What a sandbox step run as a local activity (its marker) reports the code printed."""
    if marker.marker_name != LOCAL_ACTIVITY_MARKER or "result" not in marker.details:
        return ""
    data = await decode(marker.details["data"]) if "data" in marker.details else None
    if not isinstance(data, dict) or data.get("activity_type") not in STEP_NAMES:
        return ""
    step = await decode(marker.details["result"], StepResult)
    return step.stdout if isinstance(step, StepResult) else ""
