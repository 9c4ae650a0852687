"""PythonRuntime costs, each beside a floor measured in the same run (the machine is
noisy; only ratios mean something). Prints numbers, asserts nothing.

1. Cold start: an isolated run of the code ``1`` (bubblewrap + runner, execute to result)
   vs a plain ``python -I -S -c pass``; also bubblewrap around that same ``pass``, which
   is the jail's own share.
2. Per-call round trip of each transport: 100 sequential sync tool calls through the
   runtime vs the bare channel: a child that exchanges 100 JSON lines over pipes (stdio)
   or makes 100 urllib POSTs over a unix socket to an aiohttp handler that answers at
   once (http).

    python bench/python_runtime.py [--runs 15] [--calls 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web  # noqa: E402

from codemode.runtimes import ExecutionResult  # noqa: E402
from codemode.runtimes.jail.bwrap import bwrap_argv, find_bwrap, probe_interpreter  # noqa: E402
from codemode.runtimes.python import PythonRuntime  # noqa: E402
from codemode.runtimes.runner.package import runner_zip_path  # noqa: E402

STDIO_FLOOR_CHILD = """
import json, sys
for _ in range({n}):
    sys.stdout.write(json.dumps({{"type": "call", "args": [1]}}) + "\\n"); sys.stdout.flush()
    json.loads(sys.stdin.readline())
"""

HTTP_FLOOR_CHILD = """
import json, sys, urllib.request
sys.path.insert(0, {runner!r})  # the runner's zip
from codemode_runner.channels import _unix_handler  # the runner's own client
opener = urllib.request.build_opener(urllib.request.ProxyHandler({{}}), _unix_handler({sock!r}))
import time
t0 = time.perf_counter()
for _ in range({n}):
    req = urllib.request.Request("http://sandbox/message", data=json.dumps({{"args": [1]}}).encode(), method="POST")
    with opener.open(req) as resp:
        json.loads(resp.read())
print(time.perf_counter() - t0)
"""


async def median_ms(fn: Callable[[], Awaitable[object]], runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


async def run_process(*argv: str, stdin: bytes | None = None) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await proc.communicate(stdin)


async def execute(rt: PythonRuntime, code: str, functions: dict[str, object]) -> ExecutionResult:
    execution = await rt.execute(code, functions=functions)
    async with execution:
        event = await execution.next()
        while not isinstance(event, ExecutionResult):
            await execution.provide_result(1, call_id=event.call_id)
            event = await execution.next()
    return event


async def cold_start(runs: int) -> None:
    python = sys.executable
    jail = bwrap_argv(bwrap=find_bwrap(), interpreter=probe_interpreter(python), runner=__file__)
    jailed_pass = [*jail[: jail.index("--") + 1], python, "-I", "-S", "-c", "pass"]
    rt = PythonRuntime()
    await execute(rt, "1", {})  # warm: compiles the runner once per worker
    floor, jailed, isolated = [], [], []
    for _ in range(runs):  # interleaved, so a noisy neighbour hits all three alike
        floor.append(await median_ms(lambda: run_process(python, "-I", "-S", "-c", "pass"), 1))
        jailed.append(await median_ms(lambda: run_process(*jailed_pass), 1))
        isolated.append(await median_ms(lambda: execute(rt, "1", {}), 1))
    await rt.aclose()
    f, j, i = (statistics.median(x) for x in (floor, jailed, isolated))
    print(f"cold start (median of {runs})")
    print(f"  python -I -S -c pass            {f:7.1f} ms   1.00x  (floor)")
    print(f"  bwrap + python -I -S -c pass    {j:7.1f} ms   {j / f:4.2f}x  (bwrap adds {j - f:.1f} ms)")
    print(f"  PythonRuntime run of `1`        {i:7.1f} ms   {i / f:4.2f}x")


async def stdio_floor(calls: int) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", STDIO_FLOOR_CHILD.format(n=calls),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    await proc.stdout.readline()
    t0 = time.perf_counter()
    for i in range(calls):
        if i:
            await proc.stdout.readline()
        proc.stdin.write(b'{"type": "answer", "value": 1}\n')
        await proc.stdin.drain()
    elapsed = time.perf_counter() - t0
    await proc.wait()
    return elapsed


async def http_floor(calls: int) -> float:
    async def handler(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"answer": 1})

    app = web.Application()
    app.router.add_post("/message", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    directory = tempfile.mkdtemp(prefix="codemode-bench-")
    path = os.path.join(directory, "floor.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    await web.SockSite(runner, sock).start()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", HTTP_FLOOR_CHILD.format(n=calls, sock=path, runner=str(runner_zip_path())),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, _ = await proc.communicate()
    await runner.cleanup()
    os.unlink(path)
    os.rmdir(directory)
    return float(out.decode().strip().splitlines()[-1])


async def per_call(transport: str, calls: int, runs: int) -> tuple[float, float]:
    def noop(i: int) -> int: ...

    rt = PythonRuntime(transport=transport)
    code = f"for i in range({calls}):\n    noop(i)"
    runtime_times, floor_times = [], []
    for _ in range(runs):
        with_calls = await median_ms(lambda: execute(rt, code, {"noop": noop}), 1)
        without = await median_ms(lambda: execute(rt, "for i in range(0):\n    noop(i)", {"noop": noop}), 1)
        runtime_times.append((with_calls - without) / calls)
        floor = await (stdio_floor(calls) if transport == "stdio" else http_floor(calls))
        floor_times.append(1000 * floor / calls)
    await rt.aclose()
    return statistics.median(runtime_times), statistics.median(floor_times)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    await cold_start(args.runs)
    print(f"\nper-call round trip ({args.calls} sequential sync calls, median of {max(3, args.runs // 3)})")
    for transport in ("stdio", "http"):
        runtime_ms, floor_ms = await per_call(transport, args.calls, max(3, args.runs // 3))
        print(
            f"  {transport:5}  runtime {runtime_ms:6.3f} ms/call   bare channel {floor_ms:6.3f} ms/call"
            f"   {runtime_ms / floor_ms:4.2f}x"
        )


if __name__ == "__main__":
    asyncio.run(main())
