"""What the MCP server front costs, as ratios measured in the same run:

1. ``execute`` round trip: the official MCP client calls ``execute`` on ``codemode mcp``
   (a subprocess over stdio, kept open, with a progress token) against ``codemode run``'s own
   path for the same code (start the execution, follow its calls, get the outcome: what the
   command does once it is up), in alternating pairs on one dev server and one worker; the
   median of the per-pair ratios (goal <= 1.10x). For scale, the ``codemode run`` command
   itself (a new process each time) is timed too.
2. What the model is shown: bytes of the tools list for catalogs of 10, 100 and 1,000 tools:
   the descriptions (goal: a constant beyond the threshold, <= 2 KB), with the input schemas
   (what a model reads of a tool), and the whole ``tools/list`` JSON (output schemas too).

    python bench/mcp_front.py [--calls 5] [--repeat 15]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp_types import ListToolsResult  # noqa: E402

from codemode.activities import ToolRegistry  # noqa: E402
from codemode.apps.cli.follower import Follower  # noqa: E402
from codemode.apps.mcp.backend import BackendSlot  # noqa: E402
from codemode.apps.mcp.catalog import STUBS_IN_DESCRIPTION_MAX, ToolCatalog  # noqa: E402
from codemode.apps.mcp.execute import Executions  # noqa: E402
from codemode.apps.mcp.server import build_server  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome  # noqa: E402
from tests.integrations.mcp_server.catalogs import generated_signatures  # noqa: E402


def calls_code(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


async def tools_list_bytes(n: int) -> tuple[int, int, int]:
    """(descriptions, descriptions + names + input schemas, the whole tools/list JSON)."""
    server = build_server(ToolCatalog(generated_signatures(n)), Executions(BackendSlot()))
    listing = ListToolsResult(tools=await server.list_tools()).model_dump(by_alias=True, exclude_none=True, mode="json")
    compact = {"separators": (",", ":")}
    described = sum(len(t["description"].encode()) for t in listing["tools"])
    seen = sum(
        len(
            json.dumps(
                {"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]}, **compact
            )
        )
        for t in listing["tools"]
    )
    return described, seen, len(json.dumps(listing, **compact))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--cli-repeat", type=int, default=3, help="runs of the `codemode run` command, for scale")
    args = ap.parse_args()

    print(f"what the model is shown (stubs in the execute description up to {STUBS_IN_DESCRIPTION_MAX} tools):")
    for n in (10, 100, 1000):
        described, seen, whole = await tools_list_bytes(n)
        print(
            f"  {n:>5} tools: descriptions {described:,} B; with names and input schemas {seen:,} B; "
            f"whole tools/list JSON {whole:,} B"
        )

    env = await start_local_environment()
    client = env.client
    address = client.service_client.config.target_host
    queue = f"bench-mcp-{uuid.uuid4().hex[:6]}"
    code = calls_code(args.calls)
    data_dir = os.environ.get("CODEMODE_DATA_DIR") or tempfile.mkdtemp(prefix="codemode-bench-")
    server_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CODEMODE_"))},
        "TEMPORAL_ADDRESS": address,
        "CODEMODE_TASK_QUEUE": queue,
        "CODEMODE_DATA_DIR": data_dir,
    }
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "mcp", "--tools", "bench.bench_tools"],
        env=server_env,
        cwd=str(ROOT),
    )
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def via_run_path() -> None:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=queue)
        with contextlib.redirect_stderr(io.StringIO()):  # the call lines it shows as they happen
            got = await Follower(handle, as_json=True, interactive=False).wait()
        assert isinstance(got, ExecutionOutcome) and got.success, got

    try:
        registry = ToolRegistry.from_module("bench.bench_tools")
        async with CodeModeWorker(client, registry, task_queue=queue).running():
            async with Client(params) as mcp:

                async def via_mcp() -> None:
                    res = await mcp.call_tool("execute", {"code": code}, progress_callback=on_progress)
                    assert res.structured_content["status"] == "completed", res

                for _ in range(3):  # warm up: pools, caches, the type check of this code
                    await via_mcp()
                    await via_run_path()
                mcp_s, run_s, ratios = [], [], []
                for r in range(args.repeat):
                    order = (via_mcp, via_run_path) if r % 2 == 0 else (via_run_path, via_mcp)
                    took = {}
                    for fn in order:
                        t0 = time.perf_counter()
                        await fn()
                        took[fn] = time.perf_counter() - t0
                    mcp_s.append(took[via_mcp])
                    run_s.append(took[via_run_path])
                    ratios.append(took[via_mcp] / took[via_run_path])
                assert len(progress) >= args.calls * args.repeat  # a notification per tool call

            cli = []
            with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
                f.write(code)
            for _ in range(args.cli_repeat):
                t0 = time.perf_counter()
                proc = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "codemode",
                    "run",
                    f.name,
                    "--json",
                    cwd=ROOT,
                    env=server_env,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.DEVNULL,
                )
                assert await proc.wait() == 0
                cli.append(time.perf_counter() - t0)
    finally:
        await env.shutdown()

    ms = lambda xs: [round(x * 1000) for x in xs]  # noqa: E731
    print(f"samples ms ({args.calls} calls): execute over MCP {ms(mcp_s)}; codemode run's path {ms(run_s)}")
    print(
        f"execute round trip: {statistics.median(mcp_s) * 1000:.0f} ms vs codemode run's path "
        f"{statistics.median(run_s) * 1000:.0f} ms: ratio {statistics.median(ratios):.3f}x "
        f"(median of {len(ratios)} paired runs; summed times {sum(mcp_s) / sum(run_s):.3f}x; goal <= 1.10x)"
    )
    print(
        f"for scale, the `codemode run` command (a new process, same server and worker): "
        f"{statistics.median(cli) * 1000:.0f} ms ({statistics.median(cli) / statistics.median(mcp_s):.1f}x execute)"
    )


if __name__ == "__main__":
    asyncio.run(main())
