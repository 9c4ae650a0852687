"""Clients nobody here wrote, from npm: the MCP Inspector (2.x, CLI mode) lists the tools
over stdio (starting ``codemode mcp`` itself) and calls ``execute`` over HTTP with the bearer
token; the MCP conformance suite runs the server scenarios that apply to any server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.runner import REPO
from tests.integrations.mcp_server import npm_clients
from tests.integrations.mcp_server.auth_proxy import AuthProxy
from tests.integrations.mcp_server.clients import TOOLS
from tests.integrations.mcp_server.conftest import SECRET


@pytest.fixture(scope="module")
def inspector() -> Path:
    npm_clients.ensure_installed()
    return npm_clients.bin_path("mcp-inspector")


async def run_node22(program: Path, *args: str, timeout: float = 90) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(program),
        *args,
        cwd=REPO,
        # Both want Node 22 (the machine's is 20): npm's node package carries it.
        env={**os.environ, "PATH": f"{npm_clients.node22_bin_dir()}{os.pathsep}{os.environ['PATH']}"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode(), err.decode()


async def run_inspector(inspector: Path, *args: str) -> Any:
    # A stdio server starts in a few seconds, more on a loaded machine: the default 15 s is tight.
    rc, out, err = await run_node22(inspector, "--cli", "--connect-timeout", "60000", *args)
    assert rc == 0, f"inspector exited {rc}\n{out}\n{err}"
    return json.loads(out[out.index("{") :])


async def test_inspector_lists_the_tools_over_stdio(inspector: Path, mcp_env: dict[str, str]) -> None:
    codemode = Path(sys.executable).parent / "codemode"
    env = [f"{k}={mcp_env[k]}" for k in ("TEMPORAL_ADDRESS", "CODEMODE_TASK_QUEUE", "CODEMODE_DATA_DIR")]
    listed = await run_inspector(
        inspector,
        *[arg for pair in env for arg in ("-e", pair)],
        "--cwd",
        str(REPO),
        str(codemode),
        "mcp",
        "--tools",
        TOOLS,
        "--method",
        "tools/list",
    )
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == {"execute", "search", "get_schema", "result", "rollback"}
    assert tools["execute"]["outputSchema"]["properties"]["status"]["enum"] == [
        "queued",
        "running",
        "completed",
        "failed",
        "awaiting_approval",
        "cancelled",
        "timed_out",
        "rolling_back",
    ]


async def test_inspector_calls_execute_over_http(inspector: Path, http_server: str) -> None:
    called = await run_inspector(
        inspector,
        "--transport",
        "http",
        "--server-url",
        http_server,
        "--header",
        f"Authorization: Bearer {SECRET}",
        "--method",
        "tools/call",
        "--tool-name",
        "execute",
        "--tool-arg",
        "code=[get_weather(c)['temp_c'] for c in ('Paris', 'London')]",
    )
    assert called["isError"] is False, called
    report = called["structuredContent"]
    assert report["status"] == "completed" and report["output"] == [18, 14]
    assert "get_weather(city='London')" in called["content"][0]["text"]


#: The conformance suite's server scenarios that apply to any server (the others expect the
#: test tools, prompts and resources of its reference server, or logging, which we do not offer).
SCENARIOS = ["server-initialize", "ping", "tools-list", "dns-rebinding-protection", "server-sse-multiple-streams"]


async def test_conformance_server_scenarios(http_server: str) -> None:
    """The suite cannot send a token: it runs behind a proxy that adds one and passes Host and
    Origin through, so the DNS-rebinding scenario still reaches our checks."""
    npm_clients.ensure_installed()
    proxy = await AuthProxy(http_server.removesuffix("/mcp"), SECRET).start()
    try:
        failed = []
        for scenario in SCENARIOS:
            rc, out, err = await run_node22(
                npm_clients.bin_path("conformance"), "server", "--url", f"{proxy.url}/mcp", "--scenario", scenario
            )
            if rc != 0 or "0 failed" not in out:
                failed.append(f"{scenario} (exit {rc}):\n{out[-2000:]}\n{err[-1000:]}")
        assert not failed, "\n".join(failed)
    finally:
        await proxy.stop()
