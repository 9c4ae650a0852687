"""E2BRuntime costs against the local E2B server, beside the python runtime measured in the
same run (the machine is noisy: only ratios mean something). Prints numbers, asserts nothing.

The local server runs each sandbox as bubblewrap-jailed processes on this machine, so
these figures are the runtime's own overhead (the SDK, HTTP, the Connect streams, the
output marks) without the cloud's network and VM boot; against real E2B add its
round-trip time to every request below.

1. Sandbox create: a run of the code ``1`` to its result (create, upload the runner,
   start it, run, kill) vs the same run on the python runtime; the SDK's bare
   ``create`` + ``kill`` is the server's own share.
2. Per-call round trip: 100 sequential sync tool calls, per call, vs the python runtime.
3. A durable step: per call, ``dump()`` then ``restore()`` in a fresh runtime (another
   worker: reconnect, re-attach, sync) then answer, vs answering the live handle; and
   ``suspend()`` + ``restore()`` (a run parked on an approval).

    python bench/e2b_runtime.py [--runs 9] [--calls 100]
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

from e2b_code_interpreter import E2B  # noqa: E402

from codemode.runtimes import CodeRuntime, ExecutionResult, FunctionCall  # noqa: E402
from codemode.runtimes.e2b import E2BRuntime  # noqa: E402
from codemode.runtimes.python import PythonRuntime  # noqa: E402
from tests.e2b_local import LocalE2BServer  # noqa: E402


def noop(i: int) -> int:
    """A tool that the benchmark answers at once."""
    raise NotImplementedError


async def timed(fn: Callable[[], Awaitable[object]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return (time.perf_counter() - t0) * 1000


async def execute(rt: CodeRuntime, code: str) -> ExecutionResult:
    execution = await rt.execute(code, functions={"noop": noop})
    async with execution:
        event = await execution.next()
        while not isinstance(event, ExecutionResult):
            await execution.provide_result(1, call_id=event.call_id)
            event = await execution.next()
    return event


async def create(server: LocalE2BServer, e2b: E2BRuntime, python: PythonRuntime, runs: int) -> None:
    sdk = E2B(api_key="bench", api_url=server.url, sandbox_url=server.url).AsyncSandbox

    async def bare() -> None:
        sandbox = await sdk.create(timeout=60)
        await sandbox.kill()

    floor, e2b_ms, py_ms = [], [], []
    for _ in range(runs):  # interleaved: a noisy neighbour hits all three alike
        floor.append(await timed(bare))
        e2b_ms.append(await timed(lambda: execute(e2b, "1")))
        py_ms.append(await timed(lambda: execute(python, "1")))
    f, e, p = (statistics.median(x) for x in (floor, e2b_ms, py_ms))
    print(f"sandbox create: a run of `1` to its result (median of {runs})")
    print(f"  PythonRuntime (bwrap)               {p:7.1f} ms   1.00x")
    print(f"  E2BRuntime (local server)           {e:7.1f} ms   {e / p:5.2f}x")
    print(f"    of which SDK create + kill        {f:7.1f} ms   {f / p:5.2f}x")


ECHO = "exec python3 -u -c 'import sys\nfor line in sys.stdin: sys.stdout.write(line)'"


async def bare_channel(server: LocalE2BServer, calls: int) -> float:
    """ms per line echoed by a child in a sandbox through the SDK: send_stdin, then the
    line back on the command's stream. The floor of a tool call over E2B's API."""
    sdk = E2B(api_key="bench", api_url=server.url, sandbox_url=server.url).AsyncSandbox
    sandbox = await sdk.create(timeout=60)
    lines: asyncio.Queue[str] = asyncio.Queue()
    handle = await sandbox.commands.run(ECHO, background=True, stdin=True, timeout=0, on_stdout=lines.put_nowait)
    await handle.send_stdin("warm\n")
    await lines.get()
    t0 = time.perf_counter()
    for i in range(calls):
        await handle.send_stdin(f'{{"type": "answer", "value": {i}}}\n')
        await lines.get()
    elapsed = (time.perf_counter() - t0) * 1000 / calls
    await sandbox.kill()
    return elapsed


async def per_call(server: LocalE2BServer, e2b: E2BRuntime, python: PythonRuntime, calls: int, runs: int) -> None:
    code = f"for i in range({calls}):\n    noop(i)"
    empty = "for i in range(0):\n    noop(i)"
    e2b_ms, py_ms, floor_ms = [], [], []
    for _ in range(runs):
        for rt, out in ((e2b, e2b_ms), (python, py_ms)):
            with_calls = await timed(lambda rt=rt: execute(rt, code))
            without = await timed(lambda rt=rt: execute(rt, empty))
            out.append((with_calls - without) / calls)
        floor_ms.append(await bare_channel(server, calls))
    e, p, f = statistics.median(e2b_ms), statistics.median(py_ms), statistics.median(floor_ms)
    print(f"\nper-call round trip ({calls} sequential sync calls, median of {runs})")
    print(f"  PythonRuntime (stdio pipes)          {p:7.3f} ms/call   1.00x")
    print(f"  E2BRuntime (commands API)            {e:7.3f} ms/call   {e / p:5.2f}x")
    print(
        f"    bare SDK echo (send_stdin+stream)  {f:7.3f} ms/call   {f / p:5.2f}x  (E2B runtime = {e / f:.2f}x this floor)"
    )


async def durable_step(server: LocalE2BServer, calls: int, runs: int) -> None:
    """ms per call of three ways to continue after a checkpoint."""

    def runtime() -> E2BRuntime:
        return E2BRuntime(api_key="bench", api_url=server.url, sandbox_url=server.url)

    async def one(mode: str) -> float:
        rt = runtime()
        execution = await rt.execute(f"for i in range({calls}):\n    noop(i)", functions={"noop": noop})
        event = await execution.next()
        t0 = time.perf_counter()
        while isinstance(event, FunctionCall):
            if mode != "live":
                blob = execution.dump()
                assert blob is not None
                await execution.close()  # detaches: the checkpoint is current
                if mode == "suspend + restore":
                    await rt.suspend(blob)
                other = runtime()  # another worker
                restored = await other.restore(blob)
                assert restored is not None
                execution = restored
            await execution.provide_result(1, call_id=event.call_id)
            event = await execution.next()
        elapsed = (time.perf_counter() - t0) * 1000 / calls
        await execution.close()
        return elapsed

    modes = ("live", "dump + restore", "suspend + restore")
    times: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(runs):
        for mode in modes:
            times[mode].append(await one(mode))
    live = statistics.median(times["live"])
    print(f"\na durable step on E2B ({calls} calls, ms per call, median of {runs})")
    for mode in modes:
        m = statistics.median(times[mode])
        print(f"  {mode:<20} {m:8.3f} ms/call   {m / live:6.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    with LocalE2BServer() as server:
        e2b = E2BRuntime(api_key="bench", api_url=server.url, sandbox_url=server.url)
        python = PythonRuntime()
        await execute(e2b, "1")  # warm both (imports, the runner's bytecode)
        await execute(python, "1")
        await create(server, e2b, python, args.runs)
        await per_call(server, e2b, python, args.calls, max(3, args.runs // 3))
        await durable_step(server, max(10, args.calls // 5), max(3, args.runs // 3))
        await e2b.aclose()
        await python.aclose()


if __name__ == "__main__":
    asyncio.run(main())
