"""PyodideRuntime costs, each beside the python runtime's figure measured in the same run
(the machine is noisy; read the ratios). Prints numbers, asserts nothing.

1. Start: a Deno process loaded from the memory snapshot until it waits for code (goal
   <= 0.5 s), beside a cold Pyodide start without the snapshot (``--cold-runs``) and a
   bare ``deno run`` of an empty module (Deno's own start, the floor).
2. An execution of ``1`` on a warm pool process (the pool started it beforehand), beside
   the python runtime's run of ``1`` (a fresh bubblewrap process).
3. Per-call round trip: 100 sequential sync tool calls, beside the python runtime's
   (stdio transport); and 100 calls gathered at once.

    python bench/pyodide_runtime.py [--runs 9] [--calls 100] [--cold-runs 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.runtimes import CodeRuntime, ExecutionLimits, ExecutionResult  # noqa: E402
from codemode.runtimes.pyodide import PyodideRuntime  # noqa: E402
from codemode.runtimes.python import PythonRuntime  # noqa: E402
from codemode.runtimes.wasm.deno import deno_env  # noqa: E402


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def execute(rt: CodeRuntime, code: str, functions: dict[str, object]) -> ExecutionResult:
    execution = await rt.execute(code, functions=functions)
    async with execution:
        event = await execution.next_batch()
        while not isinstance(event, ExecutionResult):
            for call in event:
                await execution.provide_result(1, call_id=call.call_id)
            event = await execution.next_batch()
    return event


async def run_deno(deno: str, deno_dir: Path, *args: str, stdin: bytes = b"") -> None:
    proc = await asyncio.create_subprocess_exec(
        deno, "run", "--quiet", "--no-prompt", *args,
        env=deno_env(deno_dir), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    await proc.communicate(stdin)


COLD = """
const { loadPyodide } = await import(Deno.args[0]);
const py = await loadPyodide({ indexURL: Deno.args[1] });
py.runPython("import sys");
"""


async def start(pyo: PyodideRuntime, runs: int, cold_runs: int) -> None:
    setup = await pyo._setup()
    spec = await pyo._spec(ExecutionLimits(), ())
    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty.mjs"
        empty.write_text("")
        cold_script = Path(tmp) / "cold.mjs"
        cold_script.write_text(COLD)
        floor, snap = [], []
        for _ in range(runs):  # interleaved, so a noisy neighbour hits both alike
            floor.append(await timed(lambda: run_deno(setup.deno, setup.deno_dir, str(empty))))

            t0 = time.perf_counter()
            proc = await pyo._start_process(spec)
            snap.append(time.perf_counter() - t0)
            await proc.aclose()  # not timed: killing and reaping is off an execution's path
        cold = [
            await timed(
                lambda: run_deno(
                    setup.deno, setup.deno_dir, f"--allow-read={setup.dist.path}", str(cold_script),
                    setup.dist.module_url, setup.dist.index_url,
                )  # fmt: skip
            )
            for _ in range(cold_runs)
        ]
    f, s = statistics.median(floor) * 1000, statistics.median(snap) * 1000
    print(f"start (median of {runs})")
    print(f"  deno run of an empty module       {f:7.1f} ms   1.00x  (floor)")
    print(f"  Pyodide from the snapshot, warm   {s:7.1f} ms   {s / f:5.2f}x  (goal <= 500 ms: {s / 500:.2f} of it)")
    if cold:
        c = statistics.median(cold) * 1000
        print(f"  Pyodide cold (no snapshot)        {c:7.1f} ms   {c / f:5.2f}x  (the snapshot saves {c / s:.1f}x)")


async def warm_execution(pyo: PyodideRuntime, py: PythonRuntime, runs: int) -> None:
    await execute(py, "1", {})  # compiles the runner once
    on_pool, python = [], []
    for _ in range(runs):
        await pyo.warm()  # a process waits: the execution does not start one
        on_pool.append(await timed(lambda: execute(pyo, "1", {})))
        python.append(await timed(lambda: execute(py, "1", {})))
    p, c = statistics.median(on_pool) * 1000, statistics.median(python) * 1000
    print(f"\nan execution of `1` (median of {runs})")
    print(f"  python runtime (fresh bwrap process)   {c:7.1f} ms   1.00x")
    print(f"  pyodide on a warm pool process         {p:7.1f} ms   {p / c:5.2f}x")


async def per_call(pyo: PyodideRuntime, py: PythonRuntime, calls: int, runs: int) -> None:
    def noop(i: int) -> int: ...

    async def anoop(i: int) -> int: ...

    async def cost(rt: CodeRuntime, code: str, empty: str, functions: dict[str, object]) -> float:
        if isinstance(rt, PyodideRuntime):
            await rt.warm()
        with_calls = await timed(lambda: execute(rt, code, functions))
        if isinstance(rt, PyodideRuntime):
            await rt.warm()
        without = await timed(lambda: execute(rt, empty, functions))
        return 1000 * (with_calls - without) / calls

    sync_code = f"for i in range({calls}):\n    noop(i)"
    sync_empty = "for i in range(0):\n    noop(i)"
    gather_code = f"import asyncio\nawait asyncio.gather(*[anoop(i) for i in range({calls})])"
    gather_empty = "import asyncio\nawait asyncio.gather(*[anoop(i) for i in range(0)])"
    rows: dict[str, list[float]] = {"py-sync": [], "pyo-sync": [], "py-gather": [], "pyo-gather": []}
    for _ in range(runs):
        rows["py-sync"].append(await cost(py, sync_code, sync_empty, {"noop": noop}))
        rows["pyo-sync"].append(await cost(pyo, sync_code, sync_empty, {"noop": noop}))
        rows["py-gather"].append(await cost(py, gather_code, gather_empty, {"anoop": anoop}))
        rows["pyo-gather"].append(await cost(pyo, gather_code, gather_empty, {"anoop": anoop}))
    m = {k: statistics.median(v) for k, v in rows.items()}
    print(f"\nper-call round trip ({calls} calls, median of {runs})")
    print(f"  sequential sync calls   python {m['py-sync']:6.3f} ms/call   pyodide {m['pyo-sync']:6.3f} ms/call"
          f"   {m['pyo-sync'] / m['py-sync']:5.2f}x")  # fmt: skip
    print(f"  gathered async calls    python {m['py-gather']:6.3f} ms/call   pyodide {m['pyo-gather']:6.3f} ms/call"
          f"   {m['pyo-gather'] / m['py-gather']:5.2f}x")  # fmt: skip


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--cold-runs", type=int, default=2)
    args = parser.parse_args()
    pyo = PyodideRuntime(pool_size=1)
    py = PythonRuntime()
    try:
        await pyo.warm()
        await start(pyo, args.runs, args.cold_runs)
        await warm_execution(pyo, py, args.runs)
        await per_call(pyo, py, args.calls, max(3, args.runs // 2))
    finally:
        await pyo.aclose()
        await py.aclose()
    print("\n" + json.dumps({"machine_load": Path("/proc/loadavg").read_text().split()[:3]}))


if __name__ == "__main__":
    asyncio.run(main())
