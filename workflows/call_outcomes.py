"""How a call's outcome is kept in its record, and how a run's end is told: pure functions
of recorded data (deterministic, for workflow code), out of ``execution_workflow.py``."""

from __future__ import annotations

from datetime import timedelta

from codemode.activities.records import preview  # noqa: F401 (its home; re-exported)
from codemode.workflows.models import ErrorInfo


def final_details(success: bool, error: ErrorInfo | None, elapsed: timedelta, calls: int) -> str:
    """The workflow's current details once the run ends (the UI shows them as markdown)."""
    tail = f"in {elapsed.total_seconds():.1f}s, {calls} tool call{'s' if calls != 1 else ''}"
    if success:
        return f"**Completed** {tail}."
    if error is None:
        return f"**Failed** {tail}."
    where = f" at line {error.line}" if error.line else ""
    message = f": {error.message[:300]}"
    word = "Timed out" if error.kind == "timeout" else "Failed"
    return f"**{word}** {tail}: `{error.type}`{where}{message}"
