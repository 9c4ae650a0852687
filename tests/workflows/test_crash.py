"""SIGKILL the worker while executions are between steps and inside tool calls: a new worker
finishes every execution, no logical call ran under two call ids, and an attempt is
repeated only when it never finished."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.workflows.models import CodeExecutionRequest

from .conftest import read_events

ROOT = Path(__file__).resolve().parents[2]
CODE = "total = 0\nfor i in range(4):\n    total += slow_step(i, 0.5)\nprint('total', total)\ntotal\n"


def spawn_worker(address: str, task_queue: str, events: Path) -> subprocess.Popen:
    env = {**os.environ, "CODEMODE_TEST_EVENTS": str(events), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/workflows/worker_proc.py"), address, task_queue],
        env=env,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


async def test_sigkill_worker_mid_flight(client, temporal_address, task_queue, events_file) -> None:
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handles = [
            await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue) for _ in range(4)
        ]
        # Kill once some calls have finished and at least one is inside its tool right now.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            events = read_events(events_file)
            ends = {(e["execution_id"], e["call_id"], e["attempt"]) for e in events if e["event"] == "end"}
            inflight = [
                e for e in events if e["event"] == "start" and (e["execution_id"], e["call_id"], e["attempt"]) not in ends
            ]
            if len(ends) >= 3 and inflight:
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
        assert outcome.output == 60
        assert outcome.stdout == "total 60\n"
        assert [c.args[0] for c in outcome.tool_calls] == [0, 1, 2, 3]

    events = read_events(events_file)
    # One logical call (an execution's i-th step) ran under exactly one call id.
    ids_per_call = collections.defaultdict(set)
    for e in events:
        ids_per_call[(e["execution_id"], e["arg"])].add(e["call_id"])
    assert len(ids_per_call) == 16
    assert all(len(ids) == 1 for ids in ids_per_call.values()), ids_per_call
    # An attempt is repeated only when it never finished: every attempt but the last was cut
    # off by the kill, either inside the tool (no end) or while its completion was on its way
    # to the server (its end written by the killed worker just before the kill).
    attempts = collections.defaultdict(dict)
    for e in events:
        attempts[(e["execution_id"], e["call_id"])].setdefault(e["attempt"], []).append(e)
    repeated = 0
    for key, by_attempt in attempts.items():
        numbers = sorted(by_attempt)
        assert {e["event"] for e in by_attempt[numbers[-1]]} == {"start", "end"}, (key, by_attempt)
        for n in numbers[:-1]:
            evs = by_attempt[n]
            assert all(e["pid"] == killed_pid for e in evs), (key, by_attempt)
            ends = [e for e in evs if e["event"] == "end"]
            assert not ends or ends[0]["t"] >= killed_at - 0.25, (key, by_attempt)
        repeated += len(numbers) - 1
    assert repeated >= 1  # the call cut off by the kill really was retried
    assert any(e["pid"] == killed_pid and e["event"] == "start" for e in events)
    # The calls recorded in the outcome match the single finished attempt of each call.
    for outcome in outcomes:
        for call in outcome.tool_calls:
            assert call.attempts == max(attempts[(outcome.execution_id, call.call_id)])
    # The killed worker held the runs live with their checkpoints deferred: the new worker's
    # retried calls found no live run, and the workflows rebuilt them from the journal.
    rebuilt = 0
    for outcome in outcomes:
        audit = await fetch_audit(client, outcome.execution_id)
        rebuilt += sum("not on this worker" in e.text for e in audit.events)
    assert rebuilt >= 1

