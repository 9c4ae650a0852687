"""What a durable step costs on Monty, against a floor measured in the same run.

A script makes 100 sequential tool calls. Per call, three loops answer it:

* floor:          provide_result + next on the live execution (no durability at all);
* dump:           dump() the checkpoint, then provide_result + next on the same live
                  execution (a worker that keeps the sandbox between steps);
* dump + restore: dump(), close, restore() the bytes in a fresh session, provide_result +
                  next (any worker continues from the bytes: what a parked run pays).

Loops run interleaved, several repetitions each; the medians are compared as ratios (the
machine is noisy: only ratios mean something). Snapshot sizes are printed too.

    python bench/runtime_steps.py [--calls 100] [--reps 7]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.runtimes import CodeExecution, ExecutionResult, FunctionCall  # noqa: E402
from codemode.runtimes.monty import MONTY_VERSION, MontyRuntime  # noqa: E402


def script(calls: int, heap_items: int = 0) -> str:
    return (
        f"ballast = list(range({heap_items}))\n"
        "total = 0\n"
        f"for i in range({calls}):\n"
        "    total += get(i)\n"
        "total"
    )


Step = Callable[[MontyRuntime, CodeExecution, FunctionCall, list[int]], Awaitable[CodeExecution]]


async def floor_step(rt: MontyRuntime, ex: CodeExecution, call: FunctionCall, sizes: list[int]) -> CodeExecution:
    await ex.provide_result(1, call_id=call.call_id)
    return ex


async def dump_step(rt: MontyRuntime, ex: CodeExecution, call: FunctionCall, sizes: list[int]) -> CodeExecution:
    blob = ex.dump()
    assert blob is not None
    sizes.append(len(blob))
    await ex.provide_result(1, call_id=call.call_id)
    return ex


async def restore_step(rt: MontyRuntime, ex: CodeExecution, call: FunctionCall, sizes: list[int]) -> CodeExecution:
    blob = ex.dump()
    assert blob is not None
    sizes.append(len(blob))
    await ex.close()
    restored = await rt.restore(blob)
    assert restored is not None
    await restored.provide_result(1, call_id=call.call_id)
    return restored


async def one_run(rt: MontyRuntime, code: str, calls: int, step: Step, sizes: list[int]) -> float:
    """Seconds spent answering the calls (the start of the execution is not counted)."""
    ex = await rt.execute(code, functions=["get"])
    event = await ex.next()
    t0 = time.perf_counter()
    while isinstance(event, FunctionCall):
        ex = await step(rt, ex, event, sizes)
        event = await ex.next()
    elapsed = time.perf_counter() - t0
    await ex.close()
    assert isinstance(event, ExecutionResult) and event.output == calls, event
    return elapsed


async def main(calls: int, reps: int) -> None:
    modes: dict[str, Step] = {"floor": floor_step, "dump": dump_step, "dump + restore": restore_step}
    times: dict[str, list[float]] = {m: [] for m in modes}
    sizes: list[int] = []
    code = script(calls)
    async with MontyRuntime() as rt:
        for mode, step in modes.items():  # warm the pool and the type checker
            await one_run(rt, code, calls, step, [])
        for _ in range(reps):
            for mode, step in modes.items():
                times[mode].append(await one_run(rt, code, calls, step, sizes if mode == "dump" else []))
        heap_sizes: dict[int, int] = {}
        for items in (1_000, 10_000, 100_000):
            got: list[int] = []
            await one_run(rt, script(1, items), 1, dump_step, got)
            heap_sizes[items] = got[0]

    median = {m: statistics.median(ts) / calls * 1000 for m, ts in times.items()}
    best = {m: min(ts) / calls * 1000 for m, ts in times.items()}
    print(f"Monty {MONTY_VERSION}: {calls} sequential calls, {reps} repetitions; ms per call (ratio to the floor)")
    print(f"  {'':<15} {'median':>16}  {'best':>16}")
    for mode in modes:
        print(
            f"  {mode:<15} {median[mode]:7.3f} ({median[mode] / median['floor']:4.2f}x)"
            f"  {best[mode]:7.3f} ({best[mode] / best['floor']:4.2f}x)"
        )
    print(
        f"  durable cost per call over the floor (median): dump {median['dump'] - median['floor']:.3f} ms, "
        f"dump + restore {median['dump + restore'] - median['floor']:.3f} ms"
    )
    first, last = sizes[0], sizes[calls - 1]
    print(
        f"snapshot (checkpoint envelope included): {first} B at call 1, {last} B at call {calls}, "
        f"median {statistics.median(sizes):.0f} B"
    )
    print("snapshot with a list of N ints on the heap: " + ", ".join(f"N={n}: {b / 1024:.0f} KiB" for n, b in heap_sizes.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.reps))
