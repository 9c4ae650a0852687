"""SIGKILL the worker in the middle of a snippet's call (issue 48): its tool calls are calls of
the calling execution, so a new worker finishes every run, the result is the one the snippet's
code gives run directly, and no logical call ran under two call ids (an attempt repeats only
when the kill cut it off)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution, start_execution
from codemode.client.snippets import promote
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.workflows.crash_helpers import check_no_call_twice, kill_mid_call, spawn_worker

from .conftest import TOOLS_MODULE, read_events

SUM = "total = 0\nfor w in weeks:\n    total += sum(r['amount'] for r in sales(w))\ntotal"


def worker(address: str, task_queue: str, events: Path) -> subprocess.Popen:
    return spawn_worker(address, task_queue, events, CODEMODE_TEST_TOOLS=TOOLS_MODULE, SALES_SECONDS="0.4")


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_sigkill_in_the_middle_of_a_snippet_call(
    client, temporal_address, task_queue, events_file, runtime
) -> None:
    """Monty continues from its checkpoint; the python runtime's process dies with the worker
    and the run is rebuilt by journal replay, its snippets from the prelude the history names."""
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=f"{task_queue}-src").running():
        source = await run_execution(
            client, CodeExecutionRequest(code=SUM, inputs={"weeks": [1]}), task_queue=f"{task_queue}-src"
        )
        direct = await run_execution(
            client, CodeExecutionRequest(code=SUM, inputs={"weeks": [1, 2, 3, 4]}), task_queue=f"{task_queue}-src"
        )
    saved, _ = await promote(client, source.execution_id, "sum_weeks", by="ana")
    events_file.write_text("")  # count the snippet runs' calls only

    first = worker(temporal_address, task_queue, events_file)
    second = None
    try:
        code = "r = snippets.sum_weeks(weeks=[1, 2, 3, 4])\nprint('total', r)\nr"
        handles = [
            await start_execution(client, CodeExecutionRequest(code=code, runtime=runtime), task_queue=task_queue)
            for _ in range(3)
        ]
        # Kill once some calls have ended and one is inside its tool right now.
        killed_at, killed_pid = await kill_mid_call(first, events_file, ended=2)
        second = worker(temporal_address, task_queue, events_file)
        outcomes = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    for outcome in outcomes:
        assert outcome.success, outcome.error
        assert outcome.output == direct.output == 312  # sum(30 * w + 3 for w in 1..4)
        assert outcome.stdout == f"total {outcome.output}\n"
        assert [u.version for u in outcome.snippets] == [saved.version]
        sales = [c for c in outcome.tool_calls if c.tool == "sales"]
        assert [c.args for c in sales] == [[1], [2], [3], [4]]
        # Monty says which calls the snippet made; CPython's code could claim anything: no origin.
        assert all(c.origin == (saved.origin if runtime == "monty" else None) for c in sales)

    events = read_events(events_file)
    check_no_call_twice(events, 12, killed_pid, killed_at)
    if runtime == "python":  # its process died with the worker: rebuilt from the journal
        from codemode.client.histories.audit import fetch_audit

        audits = [await fetch_audit(client, o.execution_id) for o in outcomes]
        assert any(step.via == "replayed" for audit in audits for step in audit.steps)
