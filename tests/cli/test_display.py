"""The lines a person reads while a run goes on (``client/display.py``)."""

from __future__ import annotations

from codemode.activities.records import ToolCallRecord
from codemode.client import display


def test_a_result_too_large_for_the_record_shows_its_start() -> None:
    """A large result is not kept in the call's record, only its size and start (the journal
    has it all): the line shows that start, where it showed ``null`` (seen with a 1.5 MB
    result at the end of a 3,000-call `codemode run`)."""
    big = ToolCallRecord(
        call_id="3001", tool="blob", summary="blob(n=1500000)", status="ok",
        result_size=1_500_002, result_preview="'xxxxxxxx…",
    )
    assert display.call_line(big) == "→ blob(n=1500000)  ✓ 'xxxxxxxx…"
    none = ToolCallRecord(call_id="1", tool="nothing", summary="nothing()", status="ok")
    assert display.call_line(none) == "→ nothing()  ✓ null"  # a tool that returned None
