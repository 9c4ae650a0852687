"""`runtime="python"` on Temporal: a live CPython process per execution on the worker that
holds it (its own task queue), dropped while parked, rebuilt by journal replay elsewhere."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import time

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest

from .conftest import TOOLS_MODULE, read_events
from .test_approval import wait_for_state
from .test_crash import spawn_worker

CODE = (
    "import asyncio, statistics\n"  # real CPython: the whole standard library
    "a = slow_step(1, 0.01)\n"
    "b = await asyncio.gather(*[fetch(i) for i in range(3)])\n"
    "try:\n    lookup('Atlantis')\nexcept ValueError as e:\n    print('caught', e)\n"
    "statistics.mean([a, *b])\n"
)


async def test_python_runtime_end_to_end(client, task_queue, worker, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="python"), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == (10 + 100 + 101 + 102) / 4
    assert outcome.stdout == "caught unknown city: Atlantis\n"
    assert outcome.runtime == "python"
    assert [c.status for c in outcome.tool_calls] == ["ok"] * 4 + ["error"]
    # The one worker keeps the process, so a lone call's activity steps it on (issue 28): the
    # workflow runs its own resume step only after the gathered calls and the failed call. The
    # start step is a local activity (issue 49): a marker in the first workflow task, so the
    # first call is scheduled by that task, not by a second one after an activity task.
    events = [e async for e in handle.fetch_history_events()]
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    gathered = ["fetch", "fetch", "fetch", "sandbox_resume"]
    assert scheduled == ["slow_step", *gathered, "lookup", "sandbox_resume"]
    completed = [e.event_id for e in events if e.HasField("workflow_task_completed_event_attributes")]
    first_marker = next(e.event_id for e in events if e.HasField("marker_recorded_event_attributes")
                        and e.marker_recorded_event_attributes.marker_name == "core_local_activity")
    assert completed[0] < first_marker < next(e.event_id for e in events
                                              if e.HasField("activity_task_scheduled_event_attributes"))
    bad = await start_execution(
        client, CodeExecutionRequest(code="x = 1\nx / 0", runtime="python"), task_queue=task_queue
    )
    failed = await bad.result()
    assert not failed.success and failed.error.type == "ZeroDivisionError" and failed.error.line == 2


async def test_parked_python_run_holds_no_process(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    worker = CodeModeWorker(client, registry, task_queue=task_queue, keep_alive_seconds=0.3)
    code = "a = slow_step(2, 0.01)\nprint('before', a)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        await asyncio.sleep(1.0)
        assert worker.sandbox.live_sessions == 0  # the keep-alive window passed: process dropped
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
        outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [20, "bob"]
    assert outcome.stdout == "before 20\nafter\n"  # replayed prints are not repeated
    starts = [e for e in read_events(events_file) if e["event"] == "start"]
    assert [(e["tool"], e["attempt"]) for e in starts] == [("slow_step", 1), ("transfer", 1)]  # nothing re-ran


async def test_sigkill_of_worker_holding_the_process(client, temporal_address, task_queue, events_file) -> None:
    code = "t = 0\nfor i in range(5):\n    t += slow_step(i, 0.3)\nprint('t', t)\nt\n"
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        deadline = time.monotonic() + 60
        while sum(e["event"] == "end" for e in read_events(events_file) if e["execution_id"] == handle.id) < 2:
            assert time.monotonic() < deadline, "the execution never got going"
            await asyncio.sleep(0.02)
        sandboxes = descendants(first.pid)
        assert sandboxes, "the worker runs the code in a process of its own"
        killed_at = time.time()
        first.send_signal(signal.SIGKILL)  # it holds the live process, mid-execution
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        outcome = await asyncio.wait_for(handle.result(), timeout=120)
        # Nothing of the killed worker's is left for a sweep: its sandboxes died with it.
        for _ in range(100):
            if not [pid for pid in sandboxes if os.path.exists(f"/proc/{pid}")]:
                break
            await asyncio.sleep(0.05)
        assert not [pid for pid in sandboxes if os.path.exists(f"/proc/{pid}")], sandboxes
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert outcome.output == 100 and outcome.stdout == "t 100\n"
    # Only this execution's: a sync tool of an earlier test may still be finishing in a thread.
    events = [e for e in read_events(events_file) if e["execution_id"] == handle.id]
    by_call = collections.defaultdict(list)
    for e in events:
        by_call[e["call_id"]].append(e)
    assert sorted({e["arg"] for e in events}) == [0, 1, 2, 3, 4]
    assert len(by_call) == 5  # one call id per logical call
    for call_id, evs in by_call.items():
        finished = [e for e in evs if e["event"] == "end"]
        # A recorded call never ran again; a repeat only replaced an attempt cut off by the kill.
        assert len(finished) == 1 or all(
            e["pid"] == first.pid and e["t"] >= killed_at - 0.25 for e in finished[:-1]
        ), (call_id, evs)
    assert any(e["pid"] != first.pid for e in events)  # the second worker carried on


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        found += children
        frontier += children
    return found
