"""SIGKILL the worker while executions are between steps and inside tool calls: a new worker
finishes every execution, no logical call ran under two call ids, and an attempt is
repeated only when it never finished."""

from __future__ import annotations

import asyncio

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.workflows.models import CodeExecutionRequest

from .conftest import read_events
from .crash_helpers import check_no_call_twice, kill_mid_call, spawn_worker

CODE = "total = 0\nfor i in range(4):\n    total += slow_step(i, 0.5)\nprint('total', total)\ntotal\n"


async def test_sigkill_worker_mid_flight(client, temporal_address, task_queue, events_file) -> None:
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handles = [
            await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue) for _ in range(4)
        ]
        # Kill once some calls have finished and at least one is inside its tool right now.
        killed_at, killed_pid = await kill_mid_call(first, events_file, ended=3)
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
    attempts = check_no_call_twice(events, 16, killed_pid, killed_at)
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
