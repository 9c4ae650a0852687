"""Sessions on a real Temporal dev server: what a cell costs, as ratios against a floor
measured in the same run (the machine is noisy: only ratios mean something). Prints
numbers, asserts nothing.

1. A cell in a warm session vs a fresh execution of the same code, paired (one after the
   other, in alternating order), per runtime: the median of the per-pair ratios. The cell
   pays the session's round trip (the Update, the cell's start as a child workflow) and
   saving the session after it; the fresh execution pays a sandbox start. Goal <= 1.10x.
2. The cost of a cold rebuild after the worker is gone, per runtime: the first cell on a
   new worker (the old one shut down; its warm or live sessions went with it) after K
   cells with a tool call each, vs a warm cell. monty loads the session's state from the
   store; python replays the K cells in a fresh process (their tool results from the
   journals, no tool runs again); e2b reconnects to the paused sandbox.
   (A worker that is SIGKILLed cannot tell its sessions: a python cell then first waits
   for the dead worker's queue, 10 s, before it rebuilds.)

    python bench/sessions.py [--pairs 15] [--cells 10] [--runtimes monty,python,e2b]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("CODEMODE_DATA_DIR", tempfile.mkdtemp(prefix="codemode-bench-sessions-"))

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution
from codemode.client.sessions import close_session, describe_session, run_cell
from codemode.worker.connection import connect
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

#: The cell both sides run: some work, no tool, nothing from the namespace.
CODE = "total = 0\nfor i in range(200):\n    total += i * i\ntotal"


async def timed(coro) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    outcome = await coro
    assert outcome.success, outcome.error
    return (time.perf_counter() - t0) * 1000


async def warm_vs_fresh(client, task_queue: str, runtime: str, pairs: int) -> tuple[float, float, float]:
    name = f"bench-{runtime}-{uuid.uuid4().hex[:6]}"
    await run_cell(client, name, "setup = 1", runtime=runtime, task_queue=task_queue)
    for _ in range(2):  # warm both paths (type-check verdicts, runner bytecode, pools)
        await run_cell(client, name, CODE, runtime=runtime, task_queue=task_queue)
        await run_execution(client, CodeExecutionRequest(code=CODE, runtime=runtime), task_queue=task_queue)
    cells, fresh, ratios = [], [], []
    for i in range(pairs):
        a = run_cell(client, name, CODE, runtime=runtime, task_queue=task_queue)
        b = run_execution(client, CodeExecutionRequest(code=CODE, runtime=runtime), task_queue=task_queue)
        if i % 2:
            f, c = await timed(b), await timed(a)
        else:
            c, f = await timed(a), await timed(b)
        cells.append(c)
        fresh.append(f)
        ratios.append(c / f)
    await close_session(client, name)
    return statistics.median(cells), statistics.median(fresh), statistics.median(ratios)


async def cold_rebuild(client, registry, task_queue: str, runtime: str, cells: int, repeat: int) -> tuple[float, float]:
    """(warm cell ms, first cell on a new worker ms), medians."""
    warm_ms, cold_ms = [], []
    for _ in range(repeat):
        name = f"cold-{runtime}-{uuid.uuid4().hex[:6]}"
        async with CodeModeWorker(client, registry, task_queue=task_queue).running():
            await run_cell(client, name, "acc = []", runtime=runtime, task_queue=task_queue)
            for i in range(cells):
                await run_cell(client, name, f"acc.append(await noop({i}))", runtime=runtime, task_queue=task_queue)
            warm_ms.append(await timed(run_cell(client, name, "len(acc)", runtime=runtime, task_queue=task_queue)))
            # Stop the worker once the session has taken in the cell's end (a query is answered
            # after the workflow task that does): a worker stopped within milliseconds of a
            # child's completion can take that task with a poll already under way and never
            # complete it, and the next cell then waits out the 10 s workflow task timeout.
            await describe_session(client, name)
        async with CodeModeWorker(client, registry, task_queue=task_queue).running():
            cold_ms.append(await timed(run_cell(client, name, "len(acc)", runtime=runtime, task_queue=task_queue)))
            await close_session(client, name)
    return statistics.median(warm_ms), statistics.median(cold_ms)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runtimes", default="monty,python,e2b")
    args = ap.parse_args()
    runtimes = [r for r in args.runtimes.split(",") if r]
    registry = ToolRegistry.from_module("bench.bench_tools")
    async with contextlib.AsyncExitStack() as stack:
        if "e2b" in runtimes:
            from tests.e2b_local import LocalE2BServer

            server = stack.enter_context(LocalE2BServer())
            os.environ.update(server.env)
        env = await start_local_environment()
        stack.push_async_callback(env.shutdown)
        client = await connect(env.client.service_client.config.target_host)
        task_queue = f"bench-{uuid.uuid4().hex[:6]}"
        print(f"1. a cell in a warm session vs a fresh execution of the same code ({args.pairs} pairs, medians)")
        async with CodeModeWorker(client, registry, task_queue=task_queue).running():
            for runtime in runtimes:
                cell, fresh, ratio = await warm_vs_fresh(client, task_queue, runtime, args.pairs)
                print(
                    f"  {runtime:<7} warm cell {cell:7.1f} ms   fresh execution {fresh:7.1f} ms   ratio {ratio:5.2f}x"
                )
        print(
            f"\n2. the first cell on a new worker after {args.cells} cells with a tool call each (medians of {args.repeat})"
        )
        for runtime in runtimes:
            warm, cold = await cold_rebuild(client, registry, task_queue, runtime, args.cells, args.repeat)
            print(f"  {runtime:<7} warm cell {warm:7.1f} ms   cold rebuild {cold:7.1f} ms   {cold / warm:5.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
