"""`runtime="pyodide"` on Temporal: a Deno process per execution on the worker that holds it
(its own task queue), dropped while parked, rebuilt by journal replay in a fresh process
elsewhere, with the same seeded random and clock."""

from __future__ import annotations

import asyncio
import collections
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
    "import asyncio, statistics, sys\n"  # CPython in WebAssembly: the whole standard library
    "a = slow_step(1, 0.01)\n"
    "b = await asyncio.gather(*[fetch(i) for i in range(3)])\n"
    "try:\n    lookup('Atlantis')\nexcept ValueError as e:\n    print('caught', e)\n"
    "[statistics.mean([a, *b]), sys.platform]\n"
)


async def test_pyodide_runtime_end_to_end(client, task_queue, worker, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="pyodide"), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [(10 + 100 + 101 + 102) / 4, "emscripten"]
    assert outcome.stdout == "caught unknown city: Atlantis\n"
    assert outcome.runtime == "pyodide"
    assert [c.status for c in outcome.tool_calls] == ["ok"] * 4 + ["error"]
    bad = await start_execution(
        client, CodeExecutionRequest(code="x = 1\nx / 0", runtime="pyodide"), task_queue=task_queue
    )
    failed = await bad.result()
    assert not failed.success and failed.error.type == "ZeroDivisionError" and failed.error.line == 2


async def test_parked_pyodide_run_holds_no_process_and_replays(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    worker = CodeModeWorker(client, registry, task_queue=task_queue, keep_alive_seconds=0.3)
    code = (
        "import random, time\n"
        "a = slow_step(2, 0.01)\n"
        "token = random.random()\n"  # seeded: the replay draws the same number
        "print('before', a)\n"
        "r = transfer('bob', a + token)\n"
        "print('after')\n"
        "[a, r['to'], r['amount'] == a + token]"
    )
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="pyodide"), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        await asyncio.sleep(1.0)
        assert worker.sandbox.live_sessions == 0  # the keep-alive window passed: process dropped
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
        outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [20, "bob", True]
    assert outcome.stdout == "before 20\nafter\n"  # replayed prints are not repeated
    starts = [e for e in read_events(events_file) if e["event"] == "start"]
    assert [(e["tool"], e["attempt"]) for e in starts] == [("slow_step", 1), ("transfer", 1)]  # nothing re-ran


async def test_sigkill_of_worker_holding_the_process(client, temporal_address, task_queue, events_file) -> None:
    code = "t = 0\nfor i in range(5):\n    t += slow_step(i, 0.3)\nprint('t', t)\nt\n"
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="pyodide"), task_queue=task_queue)
        deadline = time.monotonic() + 120
        while sum(e["event"] == "end" for e in read_events(events_file) if e["execution_id"] == handle.id) < 2:
            assert time.monotonic() < deadline, "the execution never got going"
            await asyncio.sleep(0.02)
        killed_at = time.time()
        first.send_signal(signal.SIGKILL)  # it holds the live Deno process, mid-execution
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        outcome = await asyncio.wait_for(handle.result(), timeout=180)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert outcome.output == 100 and outcome.stdout == "t 100\n"
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


async def test_cli_runs_code_with_a_package_and_refuses_one_it_cannot_have(temporal_address, tmp_path) -> None:
    import os
    import uuid

    from tests.cli.runner import base_env, codemode

    code = tmp_path / "code.py"
    code.write_text("from tabulate import tabulate\nbest = lookup('Tokyo')\nprint(tabulate([[best['city']]]))\nbest['city']\n")
    def env() -> dict[str, str]:  # a queue of its own per run: each starts its own worker
        return base_env(
            TEMPORAL_ADDRESS=temporal_address,
            CODEMODE_TASK_QUEUE=f"cli-pyodide-{uuid.uuid4().hex[:6]}",
            CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"],
            CODEMODE_PYODIDE_DIR=os.environ["CODEMODE_PYODIDE_DIR"],
        )

    args = ["run", str(code), "--tools", TOOLS_MODULE, "--runtime", "pyodide"]
    result = await codemode(*args, "--package", "tabulate", env=env(), timeout=180)
    assert result.rc == 0, result
    assert "-----\nTokyo\n-----" in result.out and '"Tokyo"' in result.out
    refused = await codemode(*args, "--package", "numpy", env=env(), timeout=180)
    assert refused.rc == 1, refused
    assert "'numpy' cannot run in the pyodide runtime" in refused.out + refused.err
