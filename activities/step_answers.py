"""The calls a sandbox step answered itself, as the workflow records them: a call refused
before running (unknown tool, invalid arguments), a ``save_artifact`` the step served, and a
saved snippet's entry (its version and arguments).
Each is a journal entry (what a replay answers from) and the call's audit record."""

from __future__ import annotations

from codemode.runtimes.journal_replay import JournalEntry

from .artifact_refs import served_record
from .models import StepResult
from .records import ErrorInfo, ToolCallRecord
from .snippets.compose import ENTRY
from .snippets.entries import entry_record


def rejected_record(entry: JournalEntry) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=entry.call_id,
        tool=entry.function_name,
        args=entry.args,
        kwargs=entry.kwargs,
        status="error",
        error=ErrorInfo(type=entry.error_type or "", message=entry.error_message, kind="invalid_call"),
        attempts=0,
        summary=entry.describe(),
    )


def answered_in_step(step: StepResult) -> list[tuple[JournalEntry, ToolCallRecord]]:
    """(journal entry, audit record) of each call ``step`` answered, refused ones first."""
    served = [(e, entry_record(e) if e.function_name == ENTRY else served_record(e)) for e in step.served]
    return [(e, rejected_record(e)) for e in step.rejected] + served
