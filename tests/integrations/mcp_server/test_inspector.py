"""A second client nobody here wrote: the MCP Inspector from npm (2.x, CLI mode) lists the
tools over stdio (starting ``codemode mcp`` itself) and calls ``execute`` over HTTP with the
bearer token."""

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
from tests.integrations.mcp_server.clients import TOOLS
from tests.integrations.mcp_server.conftest import SECRET


@pytest.fixture(scope="module")
def inspector() -> Path:
    npm_clients.ensure_installed()
    return npm_clients.bin_path("mcp-inspector")


async def run_inspector(inspector: Path, *args: str, timeout: float = 90) -> Any:
    proc = await asyncio.create_subprocess_exec(
        str(inspector),
        "--cli",
        *args,
        cwd=REPO,
        # The Inspector wants Node 22 (the machine's is 20): npm's node package carries it.
        env={**os.environ, "PATH": f"{npm_clients.node22_bin_dir()}{os.pathsep}{os.environ['PATH']}"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode == 0, f"inspector exited {proc.returncode}\n{out.decode()}\n{err.decode()}"
    text = out.decode()
    return json.loads(text[text.index("{") :])


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
    assert set(tools) == {"execute", "search", "get_schema", "result"}
    assert tools["execute"]["outputSchema"]["properties"]["status"]["enum"] == [
        "running", "completed", "failed", "awaiting_approval", "cancelled", "timed_out"
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
