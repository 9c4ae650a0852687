"""A python execution started on a warm interpreter (issue 40, ``runtimes/warm_pool.py``)
records the interpreter's hash seed with its first step, and a replay of its journal (the
run parked for a person, its process dropped) starts a cold interpreter with that seed: the
order of a set of strings, which the hash seed decides, is the same in the replay."""

from __future__ import annotations

import asyncio
import json

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.runtimes.python import PythonRuntime
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest

from .conftest import TOOLS_MODULE
from .test_approval import wait_for_state

#: The first call's argument is the order of a set of strings: a replay with another hash
#: seed would (almost surely) make a different first call, a non-determinism error.
CODE = (
    "order = ','.join(w for w in {'alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf'})\n"
    "a = lookup(order)\n"
    "r = transfer('bob', 1)\n"
    "[a['city'], r['to'], ','.join(w for w in {'alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf'})]"
)


async def test_a_warm_start_records_its_hash_seed_and_a_replay_uses_it(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    worker = CodeModeWorker(client, registry, task_queue=task_queue, keep_alive_seconds=0.3)
    async with worker.running():
        rt = worker.sandbox.runtime("python")
        assert isinstance(rt, PythonRuntime) and rt.warm_pool is not None
        rt.warm_pool.refill()
        while rt.warm_pool.ready < 1:  # (the test's timeout bounds this)
            await asyncio.sleep(0.05)
        request = CodeExecutionRequest(code=CODE, runtime="python")
        handle = await start_execution(client, request, task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        await asyncio.sleep(1.0)
        assert worker.sandbox.live_sessions == 0  # the keep-alive window passed: process dropped
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
        outcome = await handle.result()
        assert rt.warm_pool.hits >= 1
    assert outcome.success, outcome.error
    first, _, after_replay = outcome.output
    assert first == after_replay  # the replayed interpreter iterated the set in the same order
    seeds = []
    async for e in handle.fetch_history_events():
        payloads = []
        if e.HasField("activity_task_completed_event_attributes"):
            payloads = e.activity_task_completed_event_attributes.result.payloads
        elif e.HasField("marker_recorded_event_attributes"):  # the first step, a local activity (issue 49)
            details = e.marker_recorded_event_attributes.details
            payloads = details["result"].payloads if "result" in details else []
        for p in payloads:
            value = json.loads(p.data)
            if isinstance(value, dict) and "hash_seed" in value:
                seeds.append(value["hash_seed"])
    assert len(seeds) == 1  # recorded once, with the first step
