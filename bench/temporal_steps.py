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

from temporalio.common import SearchAttributeKey  # noqa: E402
from temporalio.contrib.pydantic import pydantic_data_converter  # noqa: E402
from temporalio.testing import WorkflowEnvironment  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from activities import ToolRegistry  # noqa: E402
from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from worker.binaries import temporal_cli_path  # noqa: E402
from worker.client import start_execution  # noqa: E402
from worker.worker import CodeModeWorker  # noqa: E402
from workflows.models import SA_RUNTIME, SA_STATUS, CodeExecutionRequest  # noqa: E402


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
    args = ap.parse_args()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        data_converter=pydantic_data_converter,
        search_attributes=[SearchAttributeKey.for_keyword(SA_STATUS), SearchAttributeKey.for_keyword(SA_RUNTIME)],
        dev_server_log_level="error",
        ui=False,
    )
    client = env.client
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry.from_module("bench.bench_tools")
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow], activities=[noop],
                  max_concurrent_activities=200)
    n = args.calls

    async def codemode(code: str) -> None:
        h = await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
        out = await h.result()
        assert out.success, out.error

    async def floor(calls: int, concurrent: bool = False) -> None:
        await client.execute_workflow(BareWorkflow.run, args=[calls, concurrent], id=uuid.uuid4().hex,
                                      task_queue=tq + "-bare")

    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(seq_code(2))  # warm up pools and caches
            await floor(2)
            seq_ours, seq_floor, g1, g10 = [], [], [], []
            for _ in range(args.repeat):
                seq_floor.append(await timed(floor(n)) / n)
                seq_ours.append(await timed(codemode(seq_code(n))) / n)
                rounds = max(5, n // 4)
                g1.append(await timed(codemode(gather_code(1, rounds))) / rounds)
                g10.append(await timed(codemode(gather_code(10, rounds))) / rounds)
            f, o = statistics.median(seq_floor), statistics.median(seq_ours)
            print(f"sequential: bare activity {f*1000:.1f} ms/call, durable tool call {o*1000:.1f} ms/call, "
                  f"ratio {o/f:.2f}x (target <= 1.25x)")
            a, b = statistics.median(g1), statistics.median(g10)
            print(f"concurrency: step of 1 call {a*1000:.1f} ms, step of 10 gathered calls {b*1000:.1f} ms, "
                  f"ratio {b/a:.2f}x (target <= 1.5x)")

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
