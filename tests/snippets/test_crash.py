"""SIGKILL the worker in the middle of a snippet's call (issue 48): its tool calls are calls of
the calling execution, so a new worker finishes every run, the result is the one the snippet's
code gives run directly, and no logical call ran under two call ids (an attempt repeats only
when the kill cut it off)."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution, start_execution
from codemode.client.snippets import promote
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import TOOLS_MODULE, read_events

ROOT = Path(__file__).resolve().parents[2]
SUM = "total = 0\nfor w in weeks:\n    total += sum(r['amount'] for r in sales(w))\ntotal"


def spawn_worker(address: str, task_queue: str, events: Path) -> subprocess.Popen:
    env = {
        **os.environ,
        "CODEMODE_TEST_EVENTS": str(events),
        "CODEMODE_TEST_TOOLS": TOOLS_MODULE,
        "SALES_SECONDS": "0.4",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/workflows/worker_proc.py"), address, task_queue],
        env=env,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_sigkill_in_the_middle_of_a_snippet_call(client, temporal_address, task_queue, events_file, runtime) -> None:
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

    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        code = "r = snippets.sum_weeks(weeks=[1, 2, 3, 4])\nprint('total', r)\nr"
        handles = [
            await start_execution(client, CodeExecutionRequest(code=code, runtime=runtime), task_queue=task_queue)
            for _ in range(3)
        ]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # kill once some calls ended and one is inside its tool
            events = read_events(events_file)
            ends = {(e["execution_id"], e["call_id"], e["attempt"]) for e in events if e["event"] == "end"}
            inflight = [
                e for e in events if e["event"] == "start" and (e["execution_id"], e["call_id"], e["attempt"]) not in ends
            ]
            if len(ends) >= 2 and inflight:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the executions never got going")
        killed_at = time.time()
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed_pid = first.pid
        second = spawn_worker(temporal_address, task_queue, events_file)
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
    ids_per_call = collections.defaultdict(set)
    for e in events:
        ids_per_call[(e["execution_id"], e["arg"])].add(e["call_id"])
    assert len(ids_per_call) == 12
    assert all(len(ids) == 1 for ids in ids_per_call.values()), ids_per_call
    attempts = collections.defaultdict(dict)
    for e in events:
        attempts[(e["execution_id"], e["call_id"])].setdefault(e["attempt"], []).append(e)
    repeated = 0
    for key, by_attempt in attempts.items():
        numbers = sorted(by_attempt)
        assert {e["event"] for e in by_attempt[numbers[-1]]} == {"start", "end"}, (key, by_attempt)
        for n in numbers[:-1]:  # an earlier attempt: cut off by the kill
            assert all(e["pid"] == killed_pid for e in by_attempt[n]), (key, by_attempt)
            ends = [e for e in by_attempt[n] if e["event"] == "end"]
            assert not ends or ends[0]["t"] >= killed_at - 0.25, (key, by_attempt)
        repeated += len(numbers) - 1
    assert repeated >= 1  # the call cut off by the kill really was retried
    if runtime == "python":  # its process died with the worker: rebuilt from the journal
        from codemode.client.histories.audit import fetch_audit

        audits = [await fetch_audit(client, o.execution_id) for o in outcomes]
        assert any(step.via == "replayed" for audit in audits for step in audit.steps)
