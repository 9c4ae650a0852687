"""Real data sizes on the embedded defaults: a 20 MB heap with 200 tool calls, a tool that
returns 40,000 rows (1.7 MB of JSON) followed by 40 more calls, on Monty and on CPython; a
worker SIGKILLed in the middle; checkpoints tampered with or deleted in the store; values
over the per-value cap. Nothing may leave a workflow task failing or a run terminated."""

from __future__ import annotations

import asyncio
import collections
import signal
import time

from codemode.activities import ToolRegistry
from codemode.activities.checkpoints import CheckpointScope
from codemode.activities.models import MAX_VALUE_BYTES
from codemode.client import display
from codemode.client.executions import InputTooLarge, start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes import ExecutionLimits
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest

from .conftest import TOOLS_MODULE, read_events
from .history_checks import chain_stats
from .test_approval import wait_for_state
from .test_crash import spawn_worker

#: About 20 MB of live heap (100,000 strings of 200 characters), then 200 sequential calls.
HEAP = """
data = [str(i) * 40 for i in range(100_000)]
t = 0
for i in range(200):
    t = add(t, i)
[t, len(data), sum(len(s) for s in data) > 19_000_000]
"""
#: One call returns 40,000 rows; the code aggregates them and makes 40 more calls.
ROWS = """
rows = fetch_rows(40000)
total = 0
for r in rows:
    total += r['amount']
by = {}
for i in range(40):
    by[i] = add(i, total)
[len(rows), total, by[39]]
"""
ROWS_TOTAL = sum(i % 997 for i in range(40000))
BIG = ExecutionLimits(timeout_seconds=300, max_memory_bytes=1024**3, max_tool_calls=1000)


async def test_big_heaps_and_big_results_on_both_runtimes(client, task_queue, worker, store) -> None:
    runs = {
        (name, runtime): await start_execution(
            client, CodeExecutionRequest(code=code, runtime=runtime, limits=BIG), task_queue=task_queue
        )
        for name, code in (("heap", HEAP), ("rows", ROWS))
        for runtime in ("monty", "python")
    }
    outcomes = dict(zip(runs, await asyncio.gather(*(h.result() for h in runs.values())), strict=True))
    for (name, runtime), outcome in outcomes.items():
        assert outcome.success, (name, runtime, outcome.error)
        if name == "heap":
            assert outcome.output == [19900, 100_000, True]
            assert len(outcome.tool_calls) == 200
        else:
            assert outcome.output == [40000, ROWS_TOTAL, 39 + ROWS_TOTAL]
            big = outcome.tool_calls[0]
            assert big.tool == "fetch_rows" and big.result is None and big.result_size > 1_500_000
            assert big.result_preview.startswith("[40000 items]")
    for (name, runtime), handle in runs.items():
        stats = await chain_stats(client, handle.id)
        calls = len(outcomes[name, runtime].tool_calls)
        # The heap never enters the history: a few KB per call at most, on any runtime.
        assert stats.history_bytes < calls * 3000 + 50_000, (name, runtime, stats)
        if name == "rows":  # the 1.7 MB result travelled by reference
            assert stats.external_payloads >= 1
    # Ended executions hold no checkpoint any more (the last one is released at the end).
    leftover = [k for k in await store.list_keys(bucket=store.bucket, prefix="codemode/") if "/cp/" in k]
    assert not [k for k in leftover if any(h.id in k for h in runs.values())]


async def test_sigkill_in_the_middle_of_big_runs(client, temporal_address, task_queue, events_file) -> None:
    """The heap run's checkpoint is 20 MB in the store; the rows run is on CPython (journal
    replay): a second worker finishes both, and no call ran under two ids."""
    heap = HEAP.replace("t = add(t, i)", "t += slow_step(i, 0)")
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        heap_run = await start_execution(client, CodeExecutionRequest(code=heap, limits=BIG), task_queue=task_queue)
        rows_run = await start_execution(
            client,
            CodeExecutionRequest(code=ROWS.replace("add(i, total)", "slow_step(i, 0) + total"), runtime="python", limits=BIG),
            task_queue=task_queue,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ends = [e for e in read_events(events_file) if e["event"] == "end"]
            per = collections.Counter(e["execution_id"] for e in ends)
            if per[heap_run.id] >= 60 and per[rows_run.id] >= 10:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the runs never got going")
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        heap_out, rows_out = await asyncio.wait_for(asyncio.gather(heap_run.result(), rows_run.result()), 240)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert heap_out.success, heap_out.error
    assert heap_out.output == [sum(i * 10 for i in range(200)), 100_000, True]
    assert rows_out.success, rows_out.error
    assert rows_out.output == [40000, ROWS_TOTAL, 390 + ROWS_TOTAL]
    ids = collections.defaultdict(set)
    for e in read_events(events_file):
        ids[e["execution_id"], e["arg"]].add(e["call_id"])
    assert len(ids) == 240 and all(len(v) == 1 for v in ids.values())
    for handle in (heap_run, rows_run):
        await chain_stats(client, handle.id, worker_killed=True)


PARK = "a = slow_step(1, 0)\nb = slow_step(2, 0)\nr = transfer('bob', a + b)\n[a, b, r['to']]"


async def _park_then_break_checkpoint(client, task_queue, store, events_file, how: str) -> tuple[str, list[str]]:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(client, CodeExecutionRequest(code=PARK), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
    # The worker that held the live session is gone: the next step must use the store.
    desc = await handle.describe()
    scope = CheckpointScope("default", handle.id, desc.raw_description.workflow_execution_info.first_run_id)
    keys = await store.list_keys(bucket=store.bucket, prefix=scope.prefix)
    assert len(keys) in (1, 2)  # the current checkpoint, and the one before until the next step
    for key in keys:
        if how == "tampered":
            blob = bytearray(await store.get_object(bucket=store.bucket, key=key))
            blob[len(blob) // 2] ^= 0xFF
            await store.put_object(bucket=store.bucket, key=key, data=bytes(blob))
        else:
            await store.delete_objects(bucket=store.bucket, keys=[key])
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="ana"))
        outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [10, 20, "bob"]
    audit = await fetch_audit(client, handle.id)
    return handle.id, display.audit_lines(audit)


async def test_tampered_and_deleted_checkpoints_fall_back_to_replay(client, task_queue, store, events_file) -> None:
    _, tampered = await _park_then_break_checkpoint(client, task_queue, store, events_file, "tampered")
    assert any("replayed the journal because checkpoint" in ln and "was altered in the store" in ln for ln in tampered), tampered
    _, deleted = await _park_then_break_checkpoint(client, task_queue, store, events_file, "deleted")
    assert any("replayed the journal because checkpoint" in ln and "is missing from" in ln for ln in deleted), deleted
    # Replay answered the recorded calls from the journal: no tool ran twice.
    starts = collections.Counter((e["execution_id"], e["call_id"]) for e in read_events(events_file) if e["event"] == "start")
    assert set(starts.values()) == {1} and len(starts) == 6


async def test_values_over_the_cap_are_typed_errors(client, task_queue, worker) -> None:
    mb = MAX_VALUE_BYTES // (1024 * 1024)
    code = (
        f"try:\n    blob({mb + 16})\nexcept ValueError as e:\n    r = str(e)\n"
        f"try:\n    count(['x' * 1024 * 1024] * {mb + 1})\nexcept ValueError as e:\n    s = str(e)\n"
        "[r, s]"
    )
    outcome = await (await start_execution(client, CodeExecutionRequest(code=code, limits=BIG), task_queue=task_queue)).result()
    assert outcome.success, outcome.error
    returned, passed = outcome.output
    assert returned == f"blob returned {mb + 16} MB, over the {mb} MB limit for one value: return less (a page, a summary, a file reference)"
    assert passed.startswith("the arguments of count() are") and f"over the {mb} MB limit" in passed
    too_big_output = await (
        await start_execution(client, CodeExecutionRequest(code=f"'x' * {MAX_VALUE_BYTES + 10}", limits=BIG), task_queue=task_queue)
    ).result()
    assert not too_big_output.success and "the code's output is" in too_big_output.error.message
    try:
        await start_execution(client, CodeExecutionRequest(code="n", inputs={"n": "x" * (MAX_VALUE_BYTES + 1)}))
    except InputTooLarge as err:
        assert "input 'n' is" in str(err)
    else:
        raise AssertionError("an oversized input was accepted")
