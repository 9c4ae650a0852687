"""Durable tool-call cost on a real Temporal dev server, as ratios against a floor measured
in the same run (the machine is noisy; only ratios mean something).

1. Latency per sequential tool call: a code execution making N sequential calls vs a bare
   workflow running N sequential no-op activities.  Target <= 1.25x.
2. A step of 10 concurrent calls (asyncio.gather) vs a step of one call.  Target <= 1.5x.
3. Throughput with 50 concurrent executions: tool calls/s vs bare activities/s.

    python bench/temporal_steps.py [--calls 40] [--executions 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.worker import PollerBehaviorSimpleMaximum, Worker  # noqa: E402

from activities import ToolRegistry  # noqa: E402
from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from worker.client import start_execution  # noqa: E402
from worker.server import start_local_environment  # noqa: E402
from worker.worker import CodeModeWorker  # noqa: E402
from workflows.models import CodeExecutionRequest  # noqa: E402


def seq_code(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


def gather_code(width: int, rounds: int) -> str:
    return (
        "import asyncio\nt = 0\n"
        f"for r in range({rounds}):\n"
        f"    xs = await asyncio.gather(*[noop(i) for i in range({width})])\n"
        "    t += sum(xs)\nt"
    )


async def timed(coro) -> float:
    t0 = time.perf_counter()
    await coro
    return time.perf_counter() - t0


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--executions", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-eager", dest="eager", action="store_false",
                    help="leave eager activity execution off on the server (the dev server's default)")
    args = ap.parse_args()
    env = await start_local_environment(eager=args.eager)
    client = env.client
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry.from_module("bench.bench_tools")
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow], activities=[noop],
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

    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(seq_code(2))  # warm up pools and caches
            await floor(2)
            # Alternate floor and ours and take the median of per-pair ratios: the dev server's
            # latency drifts by tens of percent within a run, so only paired samples compare.
            seq_ratio, seq_floor, seq_ours, g_ratio, g1, g10, bare_g_ratio = [], [], [], [], [], [], []
            rounds = max(5, n // 4)
            for r in range(args.repeat):
                pair = [timed(floor(n)), timed(codemode(seq_code(n)))]
                if r % 2:
                    b, a = await pair[1], await pair[0]
                else:
                    a, b = await pair[0], await pair[1]
                seq_floor.append(a / n)
                seq_ours.append(b / n)
                seq_ratio.append(b / a)
                one = await timed(codemode(gather_code(1, rounds))) / rounds
                ten = await timed(codemode(gather_code(10, rounds))) / rounds
                g1.append(one)
                g10.append(ten)
                g_ratio.append(ten / one)
                bare_one = await timed(floor(1, True, rounds)) / rounds
                bare_ten = await timed(floor(10, True, rounds)) / rounds
                bare_g_ratio.append(bare_ten / bare_one)
            ms = lambda xs: [round(x * 1000, 1) for x in xs]  # noqa: E731
            print("samples ms/call: bare", ms(seq_floor), "durable", ms(seq_ours))
            print("samples ms/step: 1 call", ms(g1), "10 gathered", ms(g10))
            print(f"sequential: bare activity {statistics.median(seq_floor)*1000:.1f} ms/call, durable tool call "
                  f"{statistics.median(seq_ours)*1000:.1f} ms/call, ratio {statistics.median(seq_ratio):.2f}x "
                  "(median of paired runs; target <= 1.25x)")
            print(f"concurrency: step of 1 call {statistics.median(g1)*1000:.1f} ms, step of 10 gathered calls "
                  f"{statistics.median(g10)*1000:.1f} ms, ratio {statistics.median(g_ratio):.2f}x (target <= 1.5x); "
                  f"the same server's floor, 10 concurrent bare activities vs 1: {statistics.median(bare_g_ratio):.2f}x")

            e, per = args.executions, max(4, n // 4)
            t_floor = await timed(asyncio.gather(*(floor(per) for _ in range(e))))
            t_ours = await timed(asyncio.gather(*(codemode(seq_code(per)) for _ in range(e))))
            floor_rate, our_rate = e * per / t_floor, e * per / t_ours
            print(f"throughput, {e} concurrent executions x {per} calls: bare {floor_rate:.0f} activities/s, "
                  f"durable {our_rate:.0f} tool calls/s, ratio {floor_rate/our_rate:.2f}x slower")
        finally:
            await bare.shutdown()
            await bare_task
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
