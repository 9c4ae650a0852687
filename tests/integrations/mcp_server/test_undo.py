"""The MCP front's ``rollback`` tool (issue 47): a run's calls that can be undone are compensated,
and ``execute``'s report lists them; a model asks for a rollback, never approves anything."""

from __future__ import annotations

import sys
import uuid

from mcp import StdioServerParameters

from tests.cli.runner import REPO
from tests.integrations.mcp_server.clients import McpSession
from tests.integrations.mcp_server.conftest import CLIENT_INFO


async def test_rollback_tool_compensates_what_a_run_applied(mcp_env: dict[str, str], tmp_path) -> None:
    env = {
        **mcp_env,
        "CODEMODE_TASK_QUEUE": f"mcp-undo-{uuid.uuid4().hex[:8]}",
        "CODEMODE_TEST_LEDGER": str(tmp_path / "ledger.jsonl"),
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "mcp", "--tools", "tests.workflows.undo_tools"],
        env=env,
        cwd=str(REPO),
    )
    async with McpSession(server, client_info=CLIENT_INFO) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert tools["rollback"].annotations.destructive_hint is True
        ran = await session.call_tool("execute", {"code": "transfer('ann', 1)\ntransfer('bo', 2)\n'paid'"})
        report = ran.structured_content
        assert report["status"] == "completed", ran
        assert [e["state"] for e in report["undo"]["entries"]] == ["applied", "applied"]
        undone = await session.call_tool(
            "rollback", {"execution_id": report["execution_id"], "reason": "paid twice", "wait_seconds": 60}
        )
    got = undone.structured_content
    assert got["status"] == "completed", undone
    assert got["execution_id"] == f"rollback:{report['execution_id']}"
    assert [e["state"] for e in got["undo"]["entries"]] == ["compensated", "compensated"]
    assert got["undo"]["rollback"]["door"] == "mcp" and got["undo"]["rollback"]["reason"] == "paid twice"
    text = undone.content[0].text
    assert "↩ call 2" in text and "compensated" in text
