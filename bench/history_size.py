"""What an execution leaves in the workflow history and in the object store, on a fresh
in-memory dev server with default limits, beside floors measured in the same run. Prints
figures and ratios, asserts nothing (no figure here is timed except the long run's clock).

1. History bytes per tool call on Monty at heaps of ~0, ~1 MB and ~20 MB (same number of
   calls), minus the calls' own arguments and results as recorded in the history (the
   ToolInput / ToolOutput payloads), beside the floor: a bare workflow running as many no-op
   activities (bench/floor_workflow.py), counted the same way. Goal (issue 7): at most 1 KB
   per call beyond the call's own arguments and result, at any heap size. Then where the
   bytes of the 20 MB run go, per event type.
2. Stored bytes per execution (Monty, ~1 MB heap) at 10, 100 and 1,000 steps: every object
   under the execution's prefixes in the store, sampled while it runs (peak) and after it
   ends, beside the floor of one checkpoint of that heap.
3. Python runtime: history bytes at 50, 100 and 200 calls. Bytes per call stay flat (the
   journal travels only to a step that must replay); before issue 7 every resume carried
   the whole journal, so bytes per call grew in proportion to the number of calls.

``--long N`` (opt-in, runs only that): N sequential tool calls (default 20,000) in one
execution on a fresh dev server with default limits: elapsed time against a short run's
per-call time, the continue-as-new chain, the largest run, and a check that no run has a
failed workflow task or was terminated, and that the audit shows every call once.

    python bench/history_size.py [--calls 100] [--steps 10,100,1000] [--python-calls 50,100,200]
    python bench/history_size.py --long [N]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.api.enums.v1 import EventType  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.models import StepResult, ToolOutput  # noqa: E402
from codemode.activities.retention import execution_prefixes  # noqa: E402
from codemode.activities.names import NOT_TOOLS as RESERVED_NAMES  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.client.histories.audit import fetch_audit  # noqa: E402
from codemode.runtimes import ExecutionLimits  # noqa: E402
from codemode.runtimes.paths import DATA_DIR_ENV  # noqa: E402
from codemode.storage import FileBlobStore  # noqa: E402
from codemode.worker.converter import data_converter  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest, ExecutionStatus  # noqa: E402

#: Strings kept alive by the code: 6,500 make about 1 MB, 100,000 about 20 MB (the heap of
#: tests/workflows/test_large_state.py: str(i) * 40, 200 characters each past i = 10,000).
HEAPS = {"~0": 0, "~1 MB": 6_500, "~20 MB": 100_000}
ONE_MB = HEAPS["~1 MB"]
LIMITS = ExecutionLimits(timeout_seconds=600, max_memory_bytes=1024**3, max_tool_calls=5_000)
#: Events that mean a run hit a limit: a workflow task that could not complete (an oversized
#: payload retries forever), a timed-out one, or a run the server ended itself.
BAD_EVENTS = frozenset(
    {
        "workflow_task_failed_event_attributes",
        "workflow_task_timed_out_event_attributes",
        "workflow_execution_terminated_event_attributes",
    }
)


def calls_code(calls: int, heap: int = 0) -> str:
    return (
        f"data = [str(i) * 40 for i in range({heap})]\n"
        "t = 0\n"
        f"for i in range({calls}):\n"
        "    t += await noop(i)\n"
        "[t, len(data)]"
    )


# -- reading what an execution left in the history -----------------------------------------


@dataclass
class History:
    runs: int = 0
    events: int = 0
    #: The server's own count (what its limits are enforced on), summed over the chain.
    bytes: int = 0
    largest_run_events: int = 0
    largest_run_bytes: int = 0
    tool_calls: int = 0
    #: The tools' arguments and results as recorded (input / result payloads of tool activities).
    tool_payload_bytes: int = 0
    external_payloads: int = 0
    external_bytes: int = 0
    #: Event type -> [count, bytes] (bytes as serialized events).
    by_type: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(lambda: [0, 0]))
    bad: list[str] = field(default_factory=list)
    #: The first sandbox step's checkpoint size (Monty), decoded through the converter.
    checkpoint_bytes: int | None = None
    #: Largest continue-as-new carry (a run's input), as the original payload size.
    largest_carry: int = 0

    def beyond_args(self) -> float:
        """Bytes per tool call beyond the calls' own arguments and results."""
        return (self.bytes - self.tool_payload_bytes) / max(self.tool_calls, 1)

    def per_call(self) -> float:
        return self.bytes / max(self.tool_calls, 1)


def _payload_bytes(payloads) -> int:
    return sum(p.ByteSize() for p in payloads.payloads)


async def read_history(client: Client, workflow_id: str, is_tool: Callable[[str], bool]) -> History:
    """Every run of the execution (latest back to the first), counted."""
    h = History()
    run_id: str | None = None
    while True:
        handle = client.get_workflow_handle(workflow_id, run_id=run_id)
        history = await handle.fetch_history()
        info = (await handle.describe()).raw_description.workflow_execution_info
        h.runs += 1
        h.events += len(history.events)
        h.bytes += info.history_size_bytes
        h.largest_run_events = max(h.largest_run_events, len(history.events))
        h.largest_run_bytes = max(h.largest_run_bytes, info.history_size_bytes)
        h.external_payloads += info.external_payload_count
        h.external_bytes += info.external_payload_size_bytes
        tools: set[int] = set()
        for e in history.events:
            kind = e.WhichOneof("attributes")
            slot = h.by_type[EventType.Name(e.event_type).removeprefix("EVENT_TYPE_")]
            slot[0] += 1
            slot[1] += e.ByteSize()
            if kind in BAD_EVENTS:
                h.bad.append(f"run {info.execution.run_id}: event {e.event_id} {kind}")
            elif kind == "activity_task_scheduled_event_attributes":
                attrs = e.activity_task_scheduled_event_attributes
                if is_tool(attrs.activity_type.name):
                    tools.add(e.event_id)
                    h.tool_calls += 1
                    h.tool_payload_bytes += _payload_bytes(attrs.input)
            elif kind == "activity_task_completed_event_attributes":
                attrs = e.activity_task_completed_event_attributes
                if attrs.scheduled_event_id in tools:
                    h.tool_payload_bytes += _payload_bytes(attrs.result)
                    if h.checkpoint_bytes is None:  # a step in the tool's result that saved one
                        try:
                            [out] = await client.data_converter.decode(attrs.result.payloads, [ToolOutput])
                        except Exception:  # the floor's bare activities return plain values
                            out = None
                        step = out.step if isinstance(out, ToolOutput) else None
                        if step is not None and step.checkpoint is not None and not step.deferred:
                            h.checkpoint_bytes = step.checkpoint.size
            elif kind == "workflow_execution_started_event_attributes":
                attrs = e.workflow_execution_started_event_attributes
                carry = attrs.input.payloads[1:]  # [request, continuation]
                if carry:
                    size = sum(
                        (p.external_payloads[0].size_bytes if p.external_payloads else p.ByteSize()) for p in carry
                    )
                    h.largest_carry = max(h.largest_carry, size)
            elif kind == "marker_recorded_event_attributes" and h.checkpoint_bytes is None:
                details = e.marker_recorded_event_attributes.details
                data = await client.data_converter.decode(details["data"].payloads) if "data" in details else [{}]
                step_marker = isinstance(data[0], dict) and data[0].get("activity_type") in STEP_MARKERS
                if "result" in details and step_marker:  # not a save_state/load_state marker
                    [step] = await client.data_converter.decode(details["result"].payloads, [StepResult])
                    if isinstance(step, StepResult) and step.checkpoint is not None and not step.deferred:
                        h.checkpoint_bytes = step.checkpoint.size
        first = history.events[0].workflow_execution_started_event_attributes
        if not first.continued_execution_run_id:
            return h
        run_id = first.continued_execution_run_id


#: Local-activity markers that hold a StepResult (a tool's activity may carry the resume step
#: in its result instead: issue 11).
STEP_MARKERS = ("sandbox_start", "sandbox_resume")


def is_codemode_tool(activity_type: str) -> bool:
    return activity_type not in RESERVED_NAMES


# -- reading what an execution left in the store --------------------------------------------


def stored(store: FileBlobStore, workflow_id: str) -> tuple[int, int, int]:
    """(objects, bytes, checkpoint objects) under the execution's prefixes."""
    base = store.root / store.bucket
    objects = size = checkpoints = 0
    for prefix in execution_prefixes("default", workflow_id):
        top = base / prefix
        if not top.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(top):
            for name in files:
                if name.endswith(".part"):
                    continue
                try:
                    size += (Path(dirpath) / name).stat().st_size
                except FileNotFoundError:  # deleted between the listing and the stat
                    continue
                objects += 1
                checkpoints += "/cp" in dirpath
    return objects, size, checkpoints


class StoreSampler:
    """Polls an execution's objects while it runs; keeps the peak."""

    def __init__(self, store: FileBlobStore, workflow_id: str, every: float = 0.1) -> None:
        self.store, self.workflow_id, self.every = store, workflow_id, every
        self.peak_bytes = self.peak_objects = self.peak_checkpoints = 0
        self._task: asyncio.Task[None] | None = None

    def sample(self) -> None:
        objects, size, checkpoints = stored(self.store, self.workflow_id)
        self.peak_bytes = max(self.peak_bytes, size)
        self.peak_objects = max(self.peak_objects, objects)
        self.peak_checkpoints = max(self.peak_checkpoints, checkpoints)

    async def _loop(self) -> None:
        while True:
            await asyncio.to_thread(self.sample)
            await asyncio.sleep(self.every)

    def __enter__(self) -> StoreSampler:
        self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


# -- the bench ---------------------------------------------------------------------------------


class Bench:
    def __init__(self, client: Client, store: FileBlobStore, task_queue: str) -> None:
        self.client, self.store, self.tq = client, store, task_queue
        self._floors: dict[int, History] = {}

    async def codemode(self, code: str, runtime: str = "monty", limits: ExecutionLimits = LIMITS) -> str:
        request = CodeExecutionRequest(code=code, runtime=runtime, limits=limits)
        handle = await start_execution(self.client, request, task_queue=self.tq)
        outcome = await handle.result()
        if not outcome.success:
            raise RuntimeError(f"{runtime} run failed: {outcome.error}")
        return handle.id

    async def floor(self, calls: int) -> History:
        if calls not in self._floors:
            wid = f"floor-{uuid.uuid4().hex[:8]}"
            await self.client.execute_workflow(BareWorkflow.run, args=[calls], id=wid, task_queue=self.tq + "-bare")
            self._floors[calls] = await read_history(self.client, wid, lambda name: True)
        return self._floors[calls]


def kb(n: float) -> str:
    return f"{n / 1024:,.1f} KB" if abs(n) < 1024 * 1024 else f"{n / 1024 / 1024:,.1f} MB"


async def history_per_call(bench: Bench, calls: int) -> None:
    floor = await bench.floor(calls)
    print(f"1. history bytes per tool call, Monty, {calls} sequential calls (fresh dev server, default limits)")
    print(
        f"   floor: bare workflow, {calls} no-op activities: {floor.per_call():,.0f} B/call, "
        f"{floor.beyond_args():,.0f} B/call beyond its own args+results "
        f"({floor.tool_payload_bytes / calls:,.0f} B/call)"
    )
    print(
        f"   {'heap':>7} {'checkpoint':>11} {'history':>9} {'B/call':>7} {'args+res':>8} "
        f"{'beyond':>7} {'floor':>6} {'over floor':>10} {'ratio':>6} {'runs':>4} {'ext':>4}"
    )
    biggest: History | None = None
    for label, heap in HEAPS.items():
        wid = await bench.codemode(calls_code(calls, heap))
        h = await read_history(bench.client, wid, is_codemode_tool)
        if h.tool_calls != calls or h.bad:
            print(f"   !! {label}: {h.tool_calls} tool calls recorded, bad events {h.bad[:3]}")
        over = h.beyond_args() - floor.beyond_args()
        print(
            f"   {label:>7} {kb(h.checkpoint_bytes or 0):>11} {kb(h.bytes):>9} {h.per_call():7,.0f} "
            f"{h.tool_payload_bytes / calls:8,.0f} {h.beyond_args():7,.0f} {floor.beyond_args():6,.0f} "
            f"{over:10,.0f} {h.beyond_args() / floor.beyond_args():5.2f}x {h.runs:4} {h.external_payloads:4}"
        )
        biggest = h
    print("   (beyond = B/call minus args+res; goal: beyond <= 1,024 B at any heap; ratio = beyond / floor's beyond)")
    assert biggest is not None
    print(f"\n   where the bytes go, {list(HEAPS)[-1]} heap run ({calls} calls), beside the floor:")
    print(f"   {'event type':<36} {'count':>6} {'bytes':>9} {'B/call':>7}   {'floor count':>11} {'B/call':>7}")
    for name, (count, size) in sorted(biggest.by_type.items(), key=lambda kv: -kv[1][1]):
        fcount, fsize = floor.by_type.get(name, (0, 0))
        print(f"   {name:<36} {count:6} {size:9,} {size / calls:7,.0f}   {fcount:11} {fsize / calls:7,.0f}")
    total = sum(s for _, s in biggest.by_type.values())
    ftotal = sum(s for _, s in floor.by_type.values())
    print(f"   {'(sum of serialized events)':<36} {biggest.events:6} {total:9,} {total / calls:7,.0f}   "
          f"{floor.events:11} {ftotal / calls:7,.0f}")  # fmt: skip


async def stored_per_execution(bench: Bench, steps_list: list[int]) -> None:
    print(f"\n2. stored bytes per execution, Monty, ~1 MB heap ({ONE_MB:,} strings), a checkpoint at most every 32 steps (deferred between)")
    print(
        f"   {'steps':>6} {'checkpoint':>10} {'peak stored':>11} {'peak objs':>9} {'peak cps':>8} "
        f"{'x checkpoint':>12} {'after end':>9} {'objs':>5} {'history':>9} {'runs':>4}"
    )
    for steps in steps_list:
        request = CodeExecutionRequest(code=calls_code(steps, ONE_MB), limits=LIMITS)
        handle = await start_execution(bench.client, request, task_queue=bench.tq)
        with StoreSampler(bench.store, handle.id) as sampler:
            outcome = await handle.result()
            sampler.sample()
        if not outcome.success:
            raise RuntimeError(f"stored-bytes run failed: {outcome.error}")
        await asyncio.sleep(0.5)  # a superseded checkpoint is deleted in the background
        objects, size, checkpoints = stored(bench.store, handle.id)
        h = await read_history(bench.client, handle.id, is_codemode_tool)
        cp = h.checkpoint_bytes or 1
        print(
            f"   {steps:6,} {kb(cp):>10} {kb(sampler.peak_bytes):>11} {sampler.peak_objects:9} "
            f"{sampler.peak_checkpoints:8} {sampler.peak_bytes / cp:11.2f}x {kb(size):>9} {objects:5} "
            f"{kb(h.bytes):>9} {h.runs:4}"
        )
    print("   (floor: one checkpoint of the heap; peak stored / checkpoint stays flat as steps grow when superseded")
    print("    checkpoints are deleted; after the end only claim-checked payloads remain, until the retention sweep)")


async def python_linear(bench: Bench, sizes: list[int]) -> None:
    print("\n3. python runtime: history bytes against the number of calls")
    print(
        f"   {'calls':>6} {'history':>9} {'B/call':>7} {'beyond':>7} {'floor':>6} {'ratio':>6} "
        f"{'marginal B/call':>15} {'runs':>4}"
    )
    previous: tuple[int, History] | None = None
    first: History | None = None
    for calls in sizes:
        wid = await bench.codemode(calls_code(calls), runtime="python")
        h = await read_history(bench.client, wid, is_codemode_tool)
        floor = await bench.floor(calls)
        marginal = ""
        if previous is not None:
            marginal = f"{(h.bytes - previous[1].bytes) / (calls - previous[0]):,.0f}"
        print(
            f"   {calls:6} {kb(h.bytes):>9} {h.per_call():7,.0f} {h.beyond_args():7,.0f} "
            f"{floor.beyond_args():6,.0f} {h.beyond_args() / floor.beyond_args():5.2f}x {marginal:>15} {h.runs:4}"
        )
        if h.bad:
            print(f"   !! bad events {h.bad[:3]}")
        previous = (calls, h)
        first = first or h
    assert first is not None and previous is not None
    growth = previous[1].per_call() / first.per_call()
    print(
        f"   B/call at {sizes[-1]} calls / at {sizes[0]}: {growth:.2f}x (linear history: ~1.00x; with the whole "
        f"journal in every resume, as before issue 7, it would be ~{sizes[-1] / sizes[0]:.1f}x)"
    )


async def long_run(client: Client, store: FileBlobStore, task_queue: str, calls: int) -> None:
    limits = ExecutionLimits(timeout_seconds=4 * 3600, max_memory_bytes=256 * 1024**2, max_tool_calls=calls + 10)
    short = 200
    bench = Bench(client, store, task_queue)
    t0 = time.perf_counter()
    await bench.codemode(calls_code(short), limits=limits)
    short_ms = (time.perf_counter() - t0) * 1000 / short
    print(f"--long {calls:,}: sequential tool calls in one execution, Monty, dev server with default limits")
    print(f"   floor: a {short}-call execution on the same server: {short_ms:.1f} ms/call")
    request = CodeExecutionRequest(code=calls_code(calls), limits=limits)
    t0 = time.perf_counter()
    handle = await start_execution(client, request, task_queue=task_queue)
    result = asyncio.ensure_future(handle.result())
    while not result.done():
        await asyncio.wait([result], timeout=60)
        if not result.done():
            status = await handle.query("status", result_type=ExecutionStatus)
            print(
                f"   ... {time.perf_counter() - t0:6.0f} s: {status.call_count:,} calls, run {status.runs}", flush=True
            )
    outcome = result.result()
    elapsed = time.perf_counter() - t0
    per_call_ms = elapsed * 1000 / calls
    print(f"   elapsed {elapsed:,.0f} s: {per_call_ms:.1f} ms/call, {per_call_ms / short_ms:.2f}x the floor's ms/call")
    ok = outcome.success and outcome.output == [calls * (calls - 1) // 2, 0] and len(outcome.tool_calls) == calls
    verdict = "right" if ok else "WRONG: " + repr(outcome.output)[:80]
    print(f"   outcome: success={outcome.success}, output {verdict}, "
          f"{len(outcome.tool_calls):,} tool calls, {outcome.runs} runs")  # fmt: skip
    h = await read_history(client, handle.id, is_codemode_tool)
    print(f"   chain: {h.runs} runs, {h.events:,} events, {kb(h.bytes)} of history in all "
          f"({h.beyond_args():,.0f} B/call beyond args+results), "
          f"{h.external_payloads} payloads claim-checked ({kb(h.external_bytes)})")  # fmt: skip
    print(f"   largest run: {h.largest_run_events:,} events (server limit 51,200), {kb(h.largest_run_bytes)} "
          f"(server limit 50 MB); largest continue-as-new carry {kb(h.largest_carry)}")  # fmt: skip
    objects, size, _ = stored(store, handle.id)
    print(f"   stored by the execution after it ended: {objects} objects, {kb(size)}")
    bad = f"{len(h.bad)}" + (f" {h.bad[:3]}" if h.bad else "")
    print(f"   failed/timed-out workflow tasks or terminations in any run: {bad}")
    audit = await fetch_audit(client, handle.id)
    ids = [c.call_id for c in audit.calls]
    print(f"   audit (codemode history): {len(ids):,} calls, {len(set(ids)):,} distinct, "
          f"statuses {dict(collections.Counter(c.status for c in audit.calls))}, {len(audit.runs)} runs")  # fmt: skip


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100, help="tool calls per run in part 1")
    ap.add_argument("--steps", default="10,100,1000", help="steps per execution in part 2")
    ap.add_argument("--python-calls", default="50,100,200", help="tool calls per run in part 3")
    ap.add_argument("--long", type=int, nargs="?", const=20_000, default=None, metavar="N",
                    help="run only the long-run check: N sequential calls (default 20,000)")  # fmt: skip
    args = ap.parse_args()

    data = Path(tempfile.mkdtemp(prefix="codemode-bench-"))
    os.environ[DATA_DIR_ENV] = str(data)  # nothing of ours lands in the user's data dir
    store = FileBlobStore(data / "blobs")
    env = await start_local_environment(data_converter=data_converter(store))
    client = env.client
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry.from_module("bench.bench_tools")
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow], activities=[noop])
    try:
        async with CodeModeWorker(client, registry, task_queue=tq).running(), bare:
            if args.long is not None:
                await long_run(client, store, tq, args.long)
                return
            bench = Bench(client, store, tq)
            await bench.codemode(calls_code(2))  # warm up pools
            await history_per_call(bench, args.calls)
            await stored_per_execution(bench, [int(s) for s in args.steps.split(",")])
            await python_linear(bench, [int(s) for s in args.python_calls.split(",")])
    finally:
        await env.shutdown()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
