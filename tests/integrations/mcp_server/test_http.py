"""``codemode mcp --transport http`` (a real subprocess) with the official MCP client over
streamable HTTP: bearer tokens (401 without), Origin and Host checks (403/421, before the
token), malformed requests answered with a JSON-RPC error while the server keeps serving,
and approvals recorded under the token's named holder."""

from __future__ import annotations

import json
import secrets
import uuid
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from temporalio.client import Client

from codemode.apps.mcp.command import mcp as mcp_command
from codemode.client.histories.audit import fetch_audit
from tests.cli.runner import codemode
from tests.integrations.mcp_server.clients import TOOLS, McpSession, Person, http_transport
from tests.integrations.mcp_server.conftest import CLIENT_INFO, SECRET

EMAIL = "send_email(to='bo@example.com', subject='Hi', body='over HTTP')"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


async def _post(url: str, body: Any, **headers: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as http:
        content = body if isinstance(body, (str, bytes)) else json.dumps(body)
        return await http.post(url, content=content, headers={**MCP_HEADERS, **headers})


async def test_no_token_is_refused(http_server: str) -> None:
    missing = await _post(http_server, INIT)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    wrong = await _post(http_server, INIT, Authorization=f"Bearer {secrets.token_hex(16)}")
    assert wrong.status_code == 401
    ok = await _post(http_server, INIT, Authorization=f"Bearer {SECRET}")
    assert ok.status_code == 200, ok.text


async def test_foreign_origin_and_host_are_refused_before_the_token(http_server: str) -> None:
    evil = await _post(http_server, INIT, Origin="http://evil.example.com", Authorization=f"Bearer {SECRET}")
    assert evil.status_code == 403
    assert (await _post(http_server, INIT, Origin="http://evil.example.com")).status_code == 403
    rebound = await _post(http_server, INIT, Host="evil.example.com:80", Authorization=f"Bearer {SECRET}")
    assert rebound.status_code == 421
    port = http_server.rsplit(":", 1)[1].split("/")[0]
    local = await _post(http_server, INIT, Origin=f"http://localhost:{port}", Authorization=f"Bearer {SECRET}")
    assert local.status_code == 200, local.text


async def test_malformed_requests_get_json_rpc_errors_and_the_server_keeps_serving(http_server: str) -> None:
    auth = {"Authorization": f"Bearer {SECRET}"}
    garbage = await _post(http_server, "{not json", **auth)
    assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700  # parse error
    wrong_shape = await _post(http_server, {"jsonrpc": "2.0", "id": 7, "method": 12}, **auth)
    assert wrong_shape.status_code == 400 and "error" in wrong_shape.json()
    async with McpSession(http_transport(http_server, SECRET), client_info=CLIENT_INFO) as session:
        tools = await session.list_tools()
        assert {t.name for t in tools.tools} == {"execute", "search", "get_schema", "result"}
        res = await session.call_tool("execute", {"code": "get_weather('Tokyo')['temp_c']"})
        assert res.structured_content["output"] == 24, res


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approval_over_http_is_recorded_under_the_tokens_holder(
    mode: str, http_server: str, client: Client
) -> None:
    person = Person(comment="ok from http")
    async with McpSession(
        http_transport(http_server, SECRET), mode=mode, elicitation_callback=person, client_info=CLIENT_INFO
    ) as session:
        res = await session.call_tool("execute", {"code": EMAIL})
    report = res.structured_content
    assert report["status"] == "completed", res
    approval = report["tool_calls"][0]["approval"]
    assert {k: approval[k] for k in ("decision", "by", "comment", "door")} == {
        "decision": "approved",
        "by": "mcp:ana",
        "comment": "ok from http",
        "door": "mcp",
    }
    audit = await fetch_audit(client, report["execution_id"])
    assert audit.calls[0].approval is not None and audit.calls[0].approval.by == "mcp:ana"


async def test_a_client_without_elicitation_gets_awaiting_approval(http_server: str, mcp_env: dict[str, str]) -> None:
    async with McpSession(http_transport(http_server, SECRET), client_info=CLIENT_INFO) as session:
        res = await session.call_tool("execute", {"code": EMAIL})
        report = res.structured_content
        assert report["status"] == "awaiting_approval", res
        [waiting] = report["pending_approvals"]
        ok = await codemode("deny", report["execution_id"], waiting["call_id"], "--by", "carol", env=mcp_env)
        assert ok.rc == 0, ok
        done = await session.call_tool("result", {"execution_id": report["execution_id"], "wait_seconds": 30})
    assert done.structured_content["status"] == "failed"
    assert "denied by carol" in done.structured_content["error"]["message"]


def run_command(*args: str, env: dict[str, str]) -> Any:
    """``codemode mcp ARGS`` in this process (for what exits before serving anything)."""
    return CliRunner().invoke(mcp_command, list(args), env=env, catch_exceptions=False)


def test_refuses_to_listen_beyond_loopback_without_a_token(mcp_env: dict[str, str]) -> None:
    env = {**mcp_env, "CODEMODE_MCP_TOKEN": ""}
    res = run_command("--tools", TOOLS, "--transport", "http", "--host", "0.0.0.0", env=env)
    assert res.exit_code == 2 and "refusing to listen on 0.0.0.0 without a token" in res.output, res.output
    short = run_command("--tools", TOOLS, "--transport", "http", "--token", "abc", env=env)
    assert short.exit_code == 2 and "at least 16 characters" in short.output, short.output


async def test_print_config(mcp_env: dict[str, str]) -> None:
    """The entry for a client's mcpServers; the stdio one through the real CLI entry point."""
    stdio = await codemode("mcp", "--tools", TOOLS, "--print-config", env=mcp_env)
    assert stdio.rc == 0, stdio
    entry = json.loads(stdio.out)["mcpServers"]["codemode"]
    assert entry["args"][-3:] == ["mcp", "--tools", TOOLS]
    assert entry["env"]["TEMPORAL_ADDRESS"] == mcp_env["TEMPORAL_ADDRESS"]
    assert entry["env"]["CODEMODE_TASK_QUEUE"] == mcp_env["CODEMODE_TASK_QUEUE"]
    token = uuid.uuid4().hex
    http = run_command(
        "--tools",
        TOOLS,
        "--transport",
        "http",
        "--port",
        "9999",
        "--token",
        f"bo:{token}",
        "--print-config",
        env={**mcp_env, "CODEMODE_MCP_TOKEN": ""},
    )
    assert json.loads(http.output) == {
        "mcpServers": {
            "codemode": {
                "type": "http",
                "url": "http://127.0.0.1:9999/mcp",
                "headers": {"Authorization": f"Bearer {token}"},  # the secret, not the holder's name
            }
        }
    }
    anonymous = run_command("--tools", TOOLS, "--transport", "http", "--print-config", env={"CODEMODE_MCP_TOKEN": ""})
    assert anonymous.exit_code == 2 and "needs the server's token" in anonymous.output
