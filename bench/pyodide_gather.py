"""Gathered async tool calls on the pyodide runtime, beside the python runtime's, in one run
(the machine is noisy: read the ratios). Prints numbers, asserts nothing.

``await asyncio.gather(*[noop(i) for i in range(N)])`` at each N:

1. Through the runtime: the host answers each batch ``next_batch()`` returns at once,
   timed from the answer to a first sync call (the code runs) to the result. Per call =
   (median with N calls - median with 0 calls) / N, pyodide and python interleaved; also
   the CPU per call (this process and its sandbox subprocesses, the same subtraction; read
   in 10 ms ticks, so only large N mean much) and how many batches the host saw. The floor
   row is the same gather over the code's own coroutines, no tool call: the interpreter
   and its event loop alone, which no change to the channel can remove.
2. Through a workflow (``start_execution`` on a local dev server, the worker in this
   process): the whole execution's latency, median, pyodide / python.

    python bench/pyodide_gather.py [--calls 10 50] [--runs 7] [--no-workflow]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cpu import CPUMeter
from codemode.runtimes import CodeRuntime, ExecutionResult
from codemode.runtimes.pyodide import PyodideRuntime
from codemode.runtimes.python import PythonRuntime


def gather_code(n: int, tag: int = 0) -> str:
    return f"import asyncio\n# {tag}\nsum(await asyncio.gather(*[noop(i) for i in range({n})]))"


def marked_code(n: int) -> str:
    """A sync call first: once it is answered the code surely runs (the start is behind)."""
    return "mark(0)\n" + gather_code(n)


def floor_code(n: int) -> str:
    """The same gather over coroutines of the code's own (no tool): the interpreter's and
    the event loop's share, which no channel change can remove."""
    return (
        "import asyncio\nasync def own(i):\n    await asyncio.sleep(0)\n    return i\nmark(0)\n"
        f"sum(await asyncio.gather(*[own(i) for i in range({n})]))"
    )


def mark(i: int) -> int: ...


async def anoop(i: int) -> int:
    return i


async def execute(rt: CodeRuntime, code: str, meter: CPUMeter | None = None) -> tuple[float, float, int]:
    """(seconds, CPU seconds, batches) from the answer to the code's first call (``mark``:
    the process has started and runs the code) to its result: the calls' share, not the
    start's."""
    execution = await rt.execute(code, functions={"noop": anoop, "mark": mark})
    batches = 0
    async with execution:
        event = await execution.next_batch()
        assert not isinstance(event, ExecutionResult) and event[0].function_name == "mark", event
        c0, t0 = meter.read() if meter else None, time.perf_counter()
        await execution.provide_result(0, call_id=event[0].call_id)
        event = await execution.next_batch()
        while not isinstance(event, ExecutionResult):
            batches += 1
            for call in event:
                await execution.provide_result(call.args[0], call_id=call.call_id)
            event = await execution.next_batch()
        t1 = time.perf_counter()
        cpu = (meter.read() - c0).worker_side if meter and c0 else 0.0
    assert isinstance(event, ExecutionResult)
    return t1 - t0, cpu, batches


async def one(rt: CodeRuntime, meter: CPUMeter, code: str) -> tuple[float, float, int]:
    if isinstance(rt, PyodideRuntime):
        await rt.warm()  # a process waits: the execution does not start one
        await asyncio.sleep(0.05)  # and the one replaced before has settled
    return await execute(rt, code, meter)


def per_call(rows: dict[str, list[tuple[float, float, int]]], key: str, i: int, n: int) -> float:
    """ms per call: the median with n calls less the median with none, over n."""
    with_calls = statistics.median(r[i] for r in rows[key])
    return 1000 * (with_calls - statistics.median(r[i] for r in rows[key + "0"])) / n


async def through_runtime(calls: list[int], runs: int) -> None:
    pyo, py, meter = PyodideRuntime(pool_size=1), PythonRuntime(), CPUMeter()
    try:
        await pyo.warm()
        await execute(py, marked_code(1))
        await execute(pyo, marked_code(1))
        print(f"1. through the runtime, first call answered to result: (N calls - 0 calls) / N, median of {runs}")
        for n in calls:
            keys = ("py", "py0", "pyo", "pyo0", "fpy", "fpy0", "fpyo", "fpyo0")
            rows: dict[str, list[tuple[float, float, int]]] = {k: [] for k in keys}
            for _ in range(runs):  # interleaved, so a noisy neighbour hits both alike
                for key, rt in (("py", py), ("pyo", pyo)):
                    rows[key].append(await one(rt, meter, marked_code(n)))
                    rows[key + "0"].append(await one(rt, meter, marked_code(0)))
                    rows["f" + key].append(await one(rt, meter, floor_code(n)))
                    rows["f" + key + "0"].append(await one(rt, meter, floor_code(0)))
            py_ms, pyo_ms = per_call(rows, "py", 0, n), per_call(rows, "pyo", 0, n)
            fpy_ms, fpyo_ms = per_call(rows, "fpy", 0, n), per_call(rows, "fpyo", 0, n)
            py_cpu, pyo_cpu = per_call(rows, "py", 1, n), per_call(rows, "pyo", 1, n)
            batches = (statistics.median(r[2] for r in rows["py"]), statistics.median(r[2] for r in rows["pyo"]))
            print(
                f"  N={n:3d}  wall  python {py_ms:6.3f} ms/call  pyodide {pyo_ms:6.3f} ms/call  {pyo_ms / py_ms:5.2f}x\n"
                f"         CPU   python {py_cpu:6.3f} ms/call  pyodide {pyo_cpu:6.3f} ms/call  {pyo_cpu / py_cpu:5.2f}x"
                f"   batches python {batches[0]:g} pyodide {batches[1]:g}\n"
                f"         floor python {fpy_ms:6.3f} ms/task  pyodide {fpyo_ms:6.3f} ms/task  {fpyo_ms / fpy_ms:5.2f}x"
                "   (the code's own coroutines, no tool)"
            )
    finally:
        await pyo.aclose()
        await py.aclose()


async def through_workflow(calls: list[int], runs: int) -> None:
    from codemode.activities import ToolRegistry
    from codemode.client.executions import start_execution
    from codemode.worker.dev_server import start_local_environment
    from codemode.worker.worker import CodeModeWorker
    from codemode.workflows.models import CodeExecutionRequest

    env = await start_local_environment()
    tags = iter(range(10**6))
    try:
        client, tq = env.client, f"bench-{uuid.uuid4().hex[:6]}"
        worker = CodeModeWorker(client, ToolRegistry.from_module("bench.bench_tools"), task_queue=tq)

        async def run(runtime: str, n: int) -> float:
            request = CodeExecutionRequest(
                code=gather_code(n, next(tags)), runtime=runtime, index_search_attributes=False
            )
            t0 = time.perf_counter()
            outcome = await (await start_execution(client, request, task_queue=tq)).result()
            assert outcome.success, outcome.error
            return time.perf_counter() - t0

        async with worker.running():
            await run("python", 1)
            await run("pyodide", 1)
            print(f"2. through a workflow: one execution's latency, median of {runs}")
            for n in calls:
                py, pyo = [], []
                for _ in range(runs):
                    py.append(await run("python", n))
                    await asyncio.sleep(0.3)  # the pool's next process is started
                    pyo.append(await run("pyodide", n))
                a, b = statistics.median(py) * 1000, statistics.median(pyo) * 1000
                print(f"  N={n:3d}  python {a:7.1f} ms  pyodide {b:7.1f} ms  {b / a:5.2f}x")
    finally:
        await env.shutdown()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-workflow", dest="workflow", action="store_false")
    args = parser.parse_args()
    load0 = Path("/proc/loadavg").read_text().split()[:3]
    await through_runtime(args.calls, args.runs)
    if args.workflow:
        await through_workflow(args.calls, args.runs)
    print(json.dumps({"load_before": load0, "load_after": Path("/proc/loadavg").read_text().split()[:3]}))


if __name__ == "__main__":
    asyncio.run(main())
