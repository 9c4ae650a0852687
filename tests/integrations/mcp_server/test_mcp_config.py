"""``codemode mcp --mcp-config``: an MCP server's tools (the npm reference memory server) join
the catalog the front serves, by the names the code calls them (``memory.read_graph``)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integrations.mcp_server.clients import McpSession, stdio_server
from tests.integrations.mcp_server.conftest import CLIENT_INFO
from tests.mcp.servers import reference_server


async def test_mcp_servers_tools_are_searched_described_and_called(mcp_env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    memory = reference_server("memory", env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")})
    config.write_text(json.dumps({"mcpServers": {"memory": memory}}))
    env = {**mcp_env, "CODEMODE_TASK_QUEUE": mcp_env["CODEMODE_TASK_QUEUE"] + "-cfg"}
    async with McpSession(stdio_server(env, "--mcp-config", str(config)), client_info=CLIENT_INFO) as session:
        found = await session.call_tool("search", {"query": "create entities in the knowledge graph", "limit": 3})
        hits = found.structured_content["tools"]
        assert hits[0]["name"] == "memory.create_entities", hits
        assert hits[0]["signature"].startswith("memory.create_entities(entities: list[")

        stubs = (await session.call_tool("get_schema", {"tools": ["memory.read_graph"]})).content[0].text
        assert "class MemoryTools:" in stubs and "def read_graph(self" in stubs and "memory: MemoryTools" in stubs
        whole = (await session.call_tool("get_schema", {"tools": ["memory"]})).content[0].text
        assert whole.count("    def ") == 9  # the namespace: all nine of its tools

        code = (
            "memory.create_entities(entities=[{'name': 'Ana', 'entityType': 'person', 'observations': ['likes tea']}])\n"
            "[e['name'] for e in memory.read_graph()['entities']]"
        )
        res = await session.call_tool("execute", {"code": code})
        report = res.structured_content
        assert report["status"] == "completed", res
        assert report["output"] == ["Ana"]
        assert [c["tool"] for c in report["tool_calls"]] == ["mcp:memory/create_entities", "mcp:memory/read_graph"]
