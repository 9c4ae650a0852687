"""What survives: a worker SIGKILLed while ``execute`` waits for the person (the answer given
afterwards still completes the run), and a Temporal server that goes away mid-call (a tool
error naming the execution; the run completes once the server is back)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from codemode.client.histories.audit import fetch_audit
from codemode.worker.dev_server import free_port
from tests.cli.runner import Background
from tests.integrations.mcp_server.clients import TOOLS, McpSession, Person, stdio_server
from tests.integrations.mcp_server.conftest import CLIENT_INFO, CLIENT_NAME

pytestmark = pytest.mark.slow

EMAIL = "send_email(to='cy@example.com', subject='Report', body='after a crash')"


async def test_worker_killed_while_execute_waits_for_the_person(
    mcp_env: dict[str, str], tmp_path: Path, client: Client
) -> None:
    env = {**mcp_env, "CODEMODE_TASK_QUEUE": f"mcp-kill-{uuid.uuid4().hex[:6]}"}
    first = await Background("worker", "--tools", TOOLS, env=env, log=tmp_path / "w1.log").start("Worker ready")
    killed = asyncio.Event()

    async def kill_the_worker() -> None:
        assert first.proc is not None
        first.proc.kill()  # SIGKILL: no goodbye to the server
        await first.proc.wait()
        killed.set()
        await asyncio.sleep(1)  # then the person answers, with no worker running

    person = Person(comment="after the crash", on_ask=kill_the_worker)
    async with McpSession(
        stdio_server(env, "--approval-wait", "60s"), mode="legacy", elicitation_callback=person, client_info=CLIENT_INFO
    ) as session:
        call = asyncio.create_task(session.call_tool("execute", {"code": EMAIL}))
        await asyncio.wait_for(killed.wait(), 60)
        second = await Background("worker", "--tools", TOOLS, env=env, log=tmp_path / "w2.log").start("Worker ready")
        try:
            res = await asyncio.wait_for(call, 120)
            report = res.structured_content
            assert report["status"] == "completed", res
            [send] = report["tool_calls"]
            assert send["status"] == "ok" and send["attempts"] == 1
            assert send["approval"]["by"] == f"mcp:{CLIENT_NAME}" and send["approval"]["decision"] == "approved"
            again = await session.call_tool("result", {"execution_id": report["execution_id"]})
            assert again.structured_content == report
        finally:
            assert await second.stop() == 0, second.output()
    audit = await fetch_audit(client, report["execution_id"])
    assert [(c.tool, c.status, c.attempts) for c in audit.calls] == [("send_email", "ok", 1)]


async def test_temporal_going_away_mid_call(mcp_env: dict[str, str], tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    db = tmp_path / "temporal.db"
    server_args = ("server", "--port", str(port), "--ui-port", str(ui_port), "--db", str(db))
    env = {**mcp_env, "TEMPORAL_ADDRESS": f"127.0.0.1:{port}", "CODEMODE_TASK_QUEUE": "mcp-outage"}
    temporal = await Background(*server_args, env=env, log=tmp_path / "t1.log").start("Ready.", timeout=60)
    async with McpSession(stdio_server(env), client_info=CLIENT_INFO) as session:
        call = asyncio.create_task(session.call_tool("execute", {"code": "await slow_echo('still here', seconds=20)"}))
        await asyncio.sleep(2)  # the call is running
        assert temporal.proc is not None
        temporal.proc.kill()  # the server goes away at once (its temporal child dies with it)
        await temporal.proc.wait()
        res: Any = await asyncio.wait_for(call, 90)
        assert res.is_error, res
        text = res.content[0].text
        assert f"Temporal at 127.0.0.1:{port} stopped answering while execution exec-" in text
        execution_id = text.split("while execution ", 1)[1].split(" ", 1)[0]

        again = await Background(*server_args, env=env, log=tmp_path / "t2.log").start("Ready.", timeout=60)
        try:
            done = await session.call_tool("result", {"execution_id": execution_id, "wait_seconds": 240})
            report = done.structured_content
            assert report["status"] == "completed", done
            assert report["output"] == "still here"
        finally:
            assert await again.stop() == 0
