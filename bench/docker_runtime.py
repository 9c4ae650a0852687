"""DockerRuntime costs against floors measured in the same run on the same engine (the
machine is noisy: only ratios mean something). Prints numbers, asserts nothing.

1. First tool call: from ``execute()`` to the first ``FunctionCall`` of a fresh run (create a
   hardened container, start it, attach, exec the input relay, load the runner over it,
   bootstrap, run to the call) vs a bare ``containers.run(image, "python3 -c pass",
   remove=True)`` on the same engine (create, start, wait, remove). Goal: at most 1.5x.
2. Per-call round trip: sequential sync tool calls, per call, vs the python runtime's
   (bubblewrap, stdio pipes).
3. A durable step: per call, ``dump()`` then ``restore()`` in a fresh runtime (another
   worker: inspect, attach, exec a relay, sync) then answer; and ``suspend()`` (pause) +
   ``restore()`` (unpause), a run parked on an approval.

Uses the engine ``DOCKER_HOST`` names and the image ``CODEMODE_DOCKER_IMAGE`` names;
without them it starts podman's service and builds the tests' image (tests/docker_engine.py).

    python bench/docker_runtime.py [--runs 7] [--calls 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.runtimes import CodeExecution, ExecutionResult, FunctionCall  # noqa: E402
from codemode.runtimes.docker import DockerRuntime  # noqa: E402
from codemode.runtimes.python import PythonRuntime  # noqa: E402


def noop(i: int) -> int:
    """A tool that the benchmark answers at once."""
    raise NotImplementedError


async def first_call(rt: DockerRuntime) -> tuple[float, CodeExecution]:
    t0 = time.perf_counter()
    execution = await rt.execute("noop(1)\nfor i in range(3):\n    noop(i)\n", functions={"noop": noop})
    event = await execution.next()
    assert isinstance(event, FunctionCall)
    return (time.perf_counter() - t0) * 1000, execution


def bare_run(rt: DockerRuntime) -> float:
    t0 = time.perf_counter()
    rt.client.containers.run(rt.image, ["python3", "-c", "pass"], remove=True, network_mode="none")
    return (time.perf_counter() - t0) * 1000


async def bench_first_call(rt: DockerRuntime, runs: int) -> None:
    await first_call(rt)  # warm the image's pages
    bare, ours = [], []
    for _ in range(runs):
        bare.append(await asyncio.to_thread(bare_run, rt))
        ms, execution = await first_call(rt)
        ours.append(ms)
        await execution.close()
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"first tool call of a run (median of {runs})")
    print(f"  bare containers.run(python3 -c pass)  {b:7.1f} ms   1.00x")
    print(f"  DockerRuntime: execute -> first call  {o:7.1f} ms   {o / b:5.2f}x   (goal <= 1.5x)")


async def per_call(rt: DockerRuntime | PythonRuntime, calls: int) -> float:
    code = f"for i in range({calls}):\n    noop(i)\n"
    execution = await rt.execute(code, functions={"noop": noop})
    async with execution:
        event = await execution.next()
        t0 = time.perf_counter()
        while not isinstance(event, ExecutionResult):
            await execution.provide_result(1, call_id=event.call_id)
            event = await execution.next()
        return (time.perf_counter() - t0) * 1000 / calls


async def bench_round_trip(rt: DockerRuntime, python: PythonRuntime, runs: int, calls: int) -> None:
    d, p = [], []
    for _ in range(runs):
        p.append(await per_call(python, calls))
        d.append(await per_call(rt, calls))
    pm, dm = statistics.median(p), statistics.median(d)
    print(f"\nper-call round trip ({calls} sequential sync calls, median of {runs})")
    print(f"  PythonRuntime (bwrap, stdio pipes)     {pm:7.3f} ms/call   1.00x")
    print(f"  DockerRuntime (attach stream + relay)  {dm:7.3f} ms/call   {dm / pm:5.2f}x")


async def bench_durable_step(image: str, base_url: str | None, runs: int, calls: int) -> None:
    results: dict[str, list[float]] = {"live handle": [], "dump + restore": [], "suspend + restore": []}
    for _ in range(runs):
        for mode in results:
            rt = DockerRuntime(image=image, base_url=base_url)
            execution = await rt.execute(f"for i in range({calls}):\n    noop(i)\n", functions={"noop": noop})
            event = await execution.next()
            t0 = time.perf_counter()
            while isinstance(event, FunctionCall):
                if mode != "live handle":
                    blob = execution.dump()
                    assert blob is not None
                    await execution.close()  # detaches: the checkpoint is current
                    if mode == "suspend + restore":
                        await rt.suspend(blob)
                    other = DockerRuntime(image=image, base_url=base_url)
                    restored = await other.restore(blob)
                    assert restored is not None
                    await rt.aclose()
                    rt, execution = other, restored
                await execution.provide_result(1, call_id=event.call_id)
                event = await execution.next()
            results[mode].append((time.perf_counter() - t0) * 1000 / calls)
            await execution.close()
            await rt.aclose()
    live = statistics.median(results["live handle"])
    print(f"\na durable step on docker ({calls} calls, ms per call, median of {runs})")
    for mode, values in results.items():
        m = statistics.median(values)
        print(f"  {mode:<20} {m:8.3f} ms/call   {m / live:6.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    service = None
    image, base_url = os.environ.get("CODEMODE_DOCKER_IMAGE"), os.environ.get("DOCKER_HOST")
    if not image or not base_url:
        from tests.docker_engine import IMAGE, PodmanService, ensure_image

        image = ensure_image(IMAGE)
        service = PodmanService().start()
        base_url = service.url
    try:
        rt = DockerRuntime(image=image, base_url=base_url)
        python = PythonRuntime()
        try:
            await bench_first_call(rt, args.runs)
            await bench_round_trip(rt, python, args.runs, args.calls)
        finally:
            await rt.aclose()
            await python.aclose()
        await bench_durable_step(image, base_url, max(1, args.runs // 3), max(5, args.calls // 10))
    finally:
        if service is not None:
            service.stop()


if __name__ == "__main__":
    asyncio.run(main())
