"""One tool call of ``CodeExecutionWorkflow``, and the records the run keeps of its calls.

``run_call`` takes a call from the step that made it to its outcome: the approval (the approvers
file's gate, a park, a person's decision), the tool's activity (retried by the tool's policy,
running the step after it when asked), and what the code gets back as a journal entry. The
records (``CallRecords``) are what ``status`` pages through and the outcome lists; results are
kept whole while small (the journal, which replay needs, always keeps everything). Workflow
code: deterministic.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import RECORD_RESULT_BYTES, CallRequest, NextStep, StepResult
    from codemode.runtimes.journal_replay import JournalEntry
    from codemode.workflows.approvals import Approvals, permission_error, summary
    from codemode.workflows.call_outcomes import preview
    from codemode.workflows.models import ErrorInfo, ToolCallRecord
    from codemode.workflows.step_activities import run_tool, tool_failure

#: Calls the status query returns at most (a long execution is read in pages), and the
#: results it carries at most (a query answer is not offloaded like a payload).
STATUS_PAGE = 500
STATUS_PAGE_BYTES = 1024 * 1024
#: Results kept whole in the call records, all calls together; past it, records keep a
#: preview (the journal, which replay needs, keeps everything). Bounds the outcome's size.
RECORDS_BUDGET = 8 * 1024 * 1024


class CallRecords:
    """The records of this run's calls, by id, and the bytes of results they keep whole."""

    def __init__(self, records: list[ToolCallRecord] | None = None, record_bytes: int = 0) -> None:
        self.by_id: dict[str, ToolCallRecord] = {c.call_id: c for c in records or []}
        #: Bytes of results kept whole in the call records so far (see RECORDS_BUDGET).
        self.record_bytes = record_bytes

    def keep_result(self, record: ToolCallRecord, value: Any, size: int) -> None:
        """A call's result in its record: whole while small and within the run's budget."""
        record.status = "ok"
        record.result_size = size
        if size <= RECORD_RESULT_BYTES and self.record_bytes + size <= RECORDS_BUDGET:
            record.result = value
            self.record_bytes += size
        else:
            record.result_preview = preview(value)

    def page(self, since: int | None, earlier: int) -> tuple[list[ToolCallRecord], int]:
        """The calls from index ``since`` (the last ``STATUS_PAGE`` when None), at most ~1 MB of
        results; and the index of the first. ``earlier``: calls of earlier runs (stored)."""
        calls = list(self.by_id.values())
        start = max(len(calls) - STATUS_PAGE, 0) if since is None else max(since - earlier, 0)
        page: list[ToolCallRecord] = []
        size = 0
        for record in calls[start : start + STATUS_PAGE]:
            if page and size + record.result_size > STATUS_PAGE_BYTES:
                break
            page.append(record)
            size += record.result_size if record.result is not None else 0
        return page, earlier + start


async def run_call(
    call: CallRequest,
    approval_timeout: timedelta,
    then: NextStep | None,
    *,
    records: CallRecords,
    approvals: Approvals,
    park: Callable[[], Awaitable[None]],
    step_begins: Callable[[], None],
) -> tuple[JournalEntry, StepResult | None]:
    """Approve (if needed) and run one call: its outcome as a journal entry, and the step after
    it when ``then`` asked the tool activity to run it and it did. The journal keeps the call as
    the code made it; a person's edit changes what the tool runs with, an answer replaces the
    tool. ``park``: parks the run's sandbox before a person is asked."""
    record = ToolCallRecord(
        call_id=call.call_id, tool=call.tool, args=call.args, kwargs=call.kwargs, summary=call.summary
    )
    records.by_id[call.call_id] = record
    asked = call.function_call()
    if call.requires_approval:
        record.status = "awaiting_approval"
        record.approval = approval = await approvals.review_call(call, approval_timeout, park)
        if approval.decision != "approved":
            record.status = "denied" if approval.decision == "denied" else "timed_out"
            record.error = permission_error(call.summary, approval)
            return JournalEntry.raised(asked, "PermissionError", record.error.message), None
        if approval.answered:  # the person's value is the result: the tool does not run
            value = approvals.answers.pop(call.call_id, None)
            records.keep_result(record, value, len(json.dumps(value, separators=(",", ":"))))
            return JournalEntry.returned(asked, value), None
        if approval.approved_arguments is not None:  # runs as approved; its own step after
            call = call.model_copy(update={"args": [], "kwargs": approval.approved_arguments})
            then = None
    record.status = "running"
    if then is not None:
        step_begins()  # the tool's activity runs the step after it
    try:
        out = await run_tool(call, then, summary=summary(call))
    except ActivityError as err:
        if isinstance(err.cause, CancelledError):
            # Only the execution's cancellation cancels a tool's activity: it is not the
            # call's outcome, and the run ends cancelled (the record says "cancelled").
            raise asyncio.CancelledError(str(err.cause)) from err
        etype, message, attempts = tool_failure(err, call)
        record.status = "error"
        record.attempts = attempts
        record.error = ErrorInfo(type=etype, message=message, kind="tool", line=call.line)
        return JournalEntry.raised(asked, etype, message), None
    record.attempts = out.attempt
    if out.unfused:
        workflow.logger.info("call %s: running the step after it separately: %s", call.call_id, out.unfused)
    if out.value_json is not None:  # large: passed on as text, kept in the record as a preview
        record.status, record.result_size, record.result_preview = "ok", out.size, out.preview
        return JournalEntry.returned_json(asked, out.value_json), out.step
    records.keep_result(record, out.value, out.size)
    return JournalEntry.returned(asked, out.value), out.step
