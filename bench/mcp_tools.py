"""An MCP server's tool called from code, durably, against its floor measured in the same run:
a bare Temporal activity plus a direct call to the same MCP server with the SDK's client (what
any durable MCP call must pay at least: one activity, one request). Target <= 1.10x.

Per pair (the order alternating; the dev server's latency drifts, so only paired samples
compare): a code execution making N sequential ``everything.echo(...)`` calls (the npm
reference server, over stdio, through the worker's connection), then N sequential no-op
activities of a bare workflow and N sequential ``tools/call`` requests from a client of our
own to another process of the same server. The ratio is ours per call over (bare activity
per call + direct call per call); the figure is the median of the pairs' ratios.

Also shown: a durable call of a Python tool doing nothing (``bench/bench_tools.py``), so the
MCP part of a call reads as the difference.

    python bench/mcp_tools.py [--calls 40] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from bench.paired import median_ms, ms, run_pairs  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.mcp_tools import McpServers  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402
from tests.mcp.servers import npm_bin  # noqa: E402


def mcp_code(n: int) -> str:
    return f"out = []\nfor i in range({n}):\n    out.append(everything.echo(message=str(i)))\nlen(out)"


def py_code(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.calls
    server = str(npm_bin() / "mcp-server-everything")
    env = await start_local_environment()
    client = env.client
    tq = f"bench-mcp-{uuid.uuid4().hex[:6]}"
    mcp = await McpServers({"mcpServers": {"everything": {"command": server, "tools": {"include": ["echo"]}}}}).start()
    cm = CodeModeWorker(client, ToolRegistry.from_module("bench.bench_tools"), task_queue=tq, mcp=mcp)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow], activities=[noop])

    async def codemode(code: str) -> None:
        h = await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
        out = await h.result()
        assert out.success, out.error

    async def floor_activities() -> None:
        await client.execute_workflow(BareWorkflow.run, args=[n], id=uuid.uuid4().hex, task_queue=tq + "-bare")

    quiet = open(os.devnull, "w")  # noqa: SIM115 - the server's banner on stderr
    async with (
        cm.running(),
        Client(stdio_client(StdioServerParameters(command=server), errlog=quiet), cache=None) as direct,
    ):

        async def direct_calls() -> None:
            for i in range(n):
                result = await direct.call_tool("echo", {"message": str(i)})
                assert not result.is_error

        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(mcp_code(2))  # warm up: pools, the type-check cache, both connections
            await codemode(py_code(2))
            await floor_activities()
            await direct_calls()
            pairs = await run_pairs(
                n,
                args.repeat,
                lambda: codemode(mcp_code(n)),
                [floor_activities, direct_calls],
                [lambda: codemode(py_code(n))],
            )
        finally:
            await bare.shutdown()
            await bare_task
    await env.shutdown()
    acts, calls = pairs.floors
    (pys,) = pairs.beside
    print(
        "samples ms/call: MCP tool in code",
        ms(pairs.ours),
        "bare activity",
        ms(acts),
        "direct MCP call",
        ms(calls),
        "Python tool in code",
        ms(pys),
    )
    print(
        f"MCP tool call from code, durable: {median_ms(pairs.ours):.1f} ms/call; floor: bare activity "
        f"{median_ms(acts):.1f} ms + direct MCP call {median_ms(calls):.2f} ms; ratio {pairs.ratio:.2f}x "
        f"(median of {len(pairs.ratios)} paired runs of {n} calls; target <= 1.10x)"
    )
    print(
        f"  a durable Python tool call in the same run: {median_ms(pys):.1f} ms/call "
        f"(the MCP part of a call: {median_ms(pairs.ours) - median_ms(pys):.2f} ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
