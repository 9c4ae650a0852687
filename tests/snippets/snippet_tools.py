"""The tools of the snippet tests: a weekly sales table, and a report that needs a person's
approval. Every call appends start/end events to $CODEMODE_TEST_EVENTS (as
tests/workflows/tools_under_test.py's do), so a test sees every attempt across worker processes.
``SALES_SECONDS`` makes ``sales`` slow enough to kill a worker in the middle of it."""

from __future__ import annotations

import os
import time
from datetime import timedelta

from codemode.activities import tool
from tests.workflows.tools_under_test import _event


@tool(timeout=timedelta(seconds=10), max_attempts=10)
def sales(week: int) -> list[dict]:
    """Sales of one week: one row per region."""
    _event("start", arg=f"sales:{week}")
    time.sleep(float(os.environ.get("SALES_SECONDS", "0")))
    rows = [{"region": r, "amount": week * 10 + i} for i, r in enumerate(("eu", "us", "asia"))]
    _event("end", arg=f"sales:{week}")
    return rows


@tool(requires_approval=True)
def send_report(to: str, total: int) -> dict:
    """Sends the weekly report: a person approves it."""
    _event("start", arg=f"send:{to}")
    return {"sent_to": to, "total": total}
