"""The Monday-morning benchmark's tool (``bench/monday.py``): a call that needs a person's
approval, which records each time it really runs (one line per run, appended to the file
``BENCH_MONDAY_LOG`` names) so the benchmark can check every call ran once."""

import os

from temporalio import activity

from codemode.activities import tool


def record() -> None:
    """Append this call's workflow id to the log (one small O_APPEND write: atomic)."""
    path = os.environ.get("BENCH_MONDAY_LOG")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{activity.info().workflow_id}\n".encode())
        finally:
            os.close(fd)


@tool(requires_approval=True)
async def send_report(to: str, body: str) -> str:
    """Sends nothing: a call that waits for a person's approval."""
    record()
    return f"sent {len(body)} characters to {to}"
