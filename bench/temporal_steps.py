"""Durable tool-call cost on a real Temporal dev server, as ratios against a floor measured
in the same run (the machine is noisy; only ratios mean something), with the CPU seconds
each side spends per call (worker process, its sandbox subprocesses, the dev server), which
do not depend on how the shared cores were divided.

1. Latency per sequential tool call: a code execution making N sequential calls vs a bare
   workflow running N sequential no-op activities.  Target <= 1.10x.
2. A step of 10 concurrent calls (asyncio.gather) vs a step of one call.  Target <= 1.10x.
3. Throughput with 50 concurrent executions: tool calls/s vs bare activities/s.  Target >= 0.8x.
   Also shown: the same bare workflow with a no-op local activity after each activity, the
   floor of this design (every sandbox step is a local activity: per tool call the worker
   handles two workflow activations and two activity tasks where the bare floor has one each).

Every figure is the median over ``--repeat`` pairs (floor and ours back to back, in
alternating order). "Worker" CPU is this process (the workers and the client that starts the
executions, the same for both sides) plus its sandbox subprocesses; with few calls in flight
(the sequential part) it also holds the pollers' idle CPU, so read CPU per call from the
throughput part.

    python bench/temporal_steps.py [--calls 40] [--executions 50] [--repeat 3] [--only throughput]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.worker import PollerBehaviorSimpleMaximum, Worker  # noqa: E402

from bench.cpu import CPU, CPUMeter  # noqa: E402
from bench.floor_workflow import BareLocalWorkflow, BareWorkflow, echo, noop  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def seq_code(n: int, tag: int | None = None) -> str:
    """N sequential calls; with ``tag``, code no other execution ran (a worker type-checks
    each distinct code once, so identical code skips ty's ~16 ms after the first run)."""
    head = f"# execution {tag}\n" if tag is not None else ""
    return f"{head}t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


def gather_code(width: int, rounds: int) -> str:
    return (
        "import asyncio\nt = 0\n"
        f"for r in range({rounds}):\n"
        f"    xs = await asyncio.gather(*[noop(i) for i in range({width})])\n"
        "    t += sum(xs)\nt"
    )


#: About the size of a resume step's result (a call request and a checkpoint reference).
STEP_BYTES = 300


def median_cpu(samples: list[CPU]) -> CPU:
    return CPU(
        statistics.median(s.worker for s in samples),
        statistics.median(s.sandbox for s in samples),
        statistics.median(s.server for s in samples),
    )


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--executions", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", choices=["latency", "throughput"], help="run one part only")
    ap.add_argument("--no-eager", dest="eager", action="store_false",
                    help="turn eager activity execution off on the server (the dev server turns it on by default too)")
    args = ap.parse_args()
    env = await start_local_environment(eager=args.eager)
    client = env.client
    meter = CPUMeter()
    if not meter.server_found:
        print("(dev server process not found: its CPU reads as 0)")
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry.from_module("bench.bench_tools")
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow, BareLocalWorkflow], activities=[noop, echo],
                  max_concurrent_activities=200, activity_task_poller_behavior=PollerBehaviorSimpleMaximum(16),
                  max_eager_activity_reservations_per_workflow_task=16)
    n = args.calls

    async def codemode(code: str) -> None:
        h = await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
        out = await h.result()
        assert out.success, out.error

    async def floor(calls: int, concurrent: bool = False, rounds: int = 1) -> None:
        await client.execute_workflow(BareWorkflow.run, args=[calls, concurrent, rounds], id=uuid.uuid4().hex,
                                      task_queue=tq + "-bare")

    async def floor_local(calls: int) -> None:
        await client.execute_workflow(BareLocalWorkflow.run, args=[calls, STEP_BYTES], id=uuid.uuid4().hex,
                                      task_queue=tq + "-bare")

    async def measure(work: Callable[[], Awaitable[object]], calls: int) -> tuple[float, CPU]:
        """Wall seconds and CPU per call of one phase."""
        c0, t0 = meter.read(), time.perf_counter()
        await work()
        wall, cpu = time.perf_counter() - t0, meter.read() - c0
        return wall, cpu.per(calls)

    async def paired(a: Callable[[], Awaitable[object]], b: Callable[[], Awaitable[object]], calls: int, r: int):
        """Floor and ours back to back, the order alternating with ``r``."""
        if r % 2:
            (tb, cb), (ta, ca) = await measure(b, calls), await measure(a, calls)
        else:
            (ta, ca), (tb, cb) = await measure(a, calls), await measure(b, calls)
        return ta, ca, tb, cb

    ms = lambda xs: [round(x * 1000, 1) for x in xs]  # noqa: E731
    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(seq_code(2))  # warm up pools and caches
            await floor(2)
            if args.only != "throughput":
                # Alternate floor and ours and take the median of per-pair ratios: the dev server's
                # latency drifts by tens of percent within a run, so only paired samples compare.
                seq_ratio, seq_floor, seq_ours, g_ratio, g1, g10, bare_g_ratio = [], [], [], [], [], [], []
                cpu_floor, cpu_ours = [], []
                rounds = max(5, n // 4)
                for r in range(args.repeat):
                    a, ca, b, cb = await paired(lambda: floor(n), lambda: codemode(seq_code(n)), n, r)
                    seq_floor.append(a / n)
                    seq_ours.append(b / n)
                    seq_ratio.append(b / a)
                    cpu_floor.append(ca)
                    cpu_ours.append(cb)
                    one, _ = await measure(lambda: codemode(gather_code(1, rounds)), rounds)
                    ten, _ = await measure(lambda: codemode(gather_code(10, rounds)), rounds)
                    g1.append(one / rounds)
                    g10.append(ten / rounds)
                    g_ratio.append(ten / one)
                    bare_one, _ = await measure(lambda: floor(1, True, rounds), rounds)
                    bare_ten, _ = await measure(lambda: floor(10, True, rounds), rounds)
                    bare_g_ratio.append(bare_ten / bare_one)
                print("samples ms/call: bare", ms(seq_floor), "durable", ms(seq_ours))
                print("samples ms/step: 1 call", ms(g1), "10 gathered", ms(g10))
                print(f"sequential: bare activity {statistics.median(seq_floor)*1000:.1f} ms/call, durable tool call "
                      f"{statistics.median(seq_ours)*1000:.1f} ms/call, ratio {statistics.median(seq_ratio):.2f}x "
                      "(median of paired runs; target <= 1.10x)")
                print(f"  CPU per call: bare {median_cpu(cpu_floor).ms()}")
                print(f"  CPU per call: durable {median_cpu(cpu_ours).ms()}")
                print(f"concurrency: step of 1 call {statistics.median(g1)*1000:.1f} ms, step of 10 gathered calls "
                      f"{statistics.median(g10)*1000:.1f} ms, ratio {statistics.median(g_ratio):.2f}x "
                      f"(target <= 1.10x); the same server's floor, 10 concurrent bare activities vs 1: "
                      f"{statistics.median(bare_g_ratio):.2f}x")

            if args.only != "latency":
                e, per = args.executions, max(4, n // 4)
                calls = e * per
                rates_floor, rates_local, rates_ours, rate_ratio, local_ratio = [], [], [], [], []
                cpu_floor, cpu_local, cpu_ours = [], [], []
                rates_new, new_ratio, cpu_new = [], [], []
                tags = itertools.count()
                for r in range(args.repeat):
                    a, ca, b, cb = await paired(
                        lambda: asyncio.gather(*(floor(per) for _ in range(e))),
                        lambda: asyncio.gather(*(codemode(seq_code(per)) for _ in range(e))),
                        calls,
                        r,
                    )
                    c, cc = await measure(lambda: asyncio.gather(*(floor_local(per) for _ in range(e))), calls)
                    d, cd = await measure(
                        lambda: asyncio.gather(*(codemode(seq_code(per, next(tags))) for _ in range(e))), calls
                    )
                    rates_new.append(calls / d)
                    new_ratio.append(a / d)
                    cpu_new.append(cd)
                    rates_floor.append(calls / a)
                    rates_local.append(calls / c)
                    rates_ours.append(calls / b)
                    rate_ratio.append(a / b)
                    local_ratio.append(c / b)
                    cpu_floor.append(ca)
                    cpu_local.append(cc)
                    cpu_ours.append(cb)
                cf, cl, co, cn = median_cpu(cpu_floor), median_cpu(cpu_local), median_cpu(cpu_ours), median_cpu(cpu_new)
                print("samples calls/s: bare", [round(x) for x in rates_floor], "bare + local activity",
                      [round(x) for x in rates_local], "durable", [round(x) for x in rates_ours],
                      "durable, new code", [round(x) for x in rates_new])
                print(f"throughput, {e} concurrent executions x {per} calls: bare {statistics.median(rates_floor):.0f} "
                      f"activities/s, durable {statistics.median(rates_ours):.0f} tool calls/s, ratio "
                      f"{statistics.median(rate_ratio):.2f}x of the floor (median of paired runs; target >= 0.8x)")
                print(f"  durable, every execution new code (type-checked; the line above runs one code, "
                      f"checked once): {statistics.median(rates_new):.0f} tool calls/s, "
                      f"{statistics.median(new_ratio):.2f}x of the floor")
                print(f"  bare + a no-op local activity per call (this design's floor): "
                      f"{statistics.median(rates_local):.0f} calls/s; durable is {statistics.median(local_ratio):.2f}x of it")
                print(f"  CPU per call: bare {cf.ms()}")
                print(f"  CPU per call: bare + local activity {cl.ms()}")
                print(f"  CPU per call: durable {co.ms()}")
                print(f"  CPU per call: durable, new code {cn.ms()}")
                print(f"  worker CPU per call, durable / bare: {co.worker_side / cf.worker_side:.2f}x "
                      f"(/ bare + local activity: {co.worker_side / cl.worker_side:.2f}x); "
                      f"server: {co.server / cf.server if cf.server else float('nan'):.2f}x")
        finally:
            await bare.shutdown()
            await bare_task
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
