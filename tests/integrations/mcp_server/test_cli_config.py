"""``codemode mcp --cli-config``: a binary's commands join the catalog the front serves:
``search`` finds them by their listed signature; ``get_schema`` shows a
subcommand's full signature (its help read then); ``execute`` runs git from code. A small
catalog's ``execute`` description lists the namespace and its subcommands, not their flags."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_tools.conftest import make_repo
from tests.integrations.mcp_server.clients import McpSession, stdio_server
from tests.integrations.mcp_server.conftest import CLIENT_INFO


async def test_cli_commands_are_listed_described_and_called(mcp_env: dict[str, str], tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    config = tmp_path / "cli.json"
    config.write_text(json.dumps({"cliTools": {"git": {"allow": ["log", "diff"], "cwd": str(repo)}}}))
    env = {**mcp_env, "CODEMODE_TASK_QUEUE": mcp_env["CODEMODE_TASK_QUEUE"] + "-cli"}
    async with McpSession(stdio_server(env, "--cli-config", str(config)), client_info=CLIENT_INFO) as session:
        found = await session.call_tool("search", {"query": "git log", "limit": 3})
        hits = {h["name"]: h for h in found.structured_content["tools"]}
        assert hits["git.log"]["signature"] == "git.log(*args: str, **flags: Any) -> dict[str, Any]"  # listed, not read

        stubs = (await session.call_tool("get_schema", {"tools": ["git.log"]})).content[0].text
        assert "def log(self, revision_range: str | None = None" in stubs and "max_count: int | None = None" in stubs
        assert "usage: git log" in stubs
        whole = (await session.call_tool("get_schema", {"tools": ["git"]})).content[0].text
        assert whole.count("    def ") == 2

        code = "git.diff(path='src', stat=True)['stdout'].strip()"
        res = await session.call_tool("execute", {"code": code})
        report = res.structured_content
        assert report["status"] == "completed", res
        assert report["output"].startswith("src/app.py | 2 +-")
        assert [c["tool"] for c in report["tool_calls"]] == ["cli:git/diff"]


def test_a_small_catalog_lists_subcommands_and_get_schema_shows_flags(tmp_path: Path) -> None:
    from codemode.activities import ToolRegistry
    from codemode.activities.cli_tools import CliTools
    from codemode.apps.mcp.catalog import ToolCatalog

    repo = make_repo(tmp_path / "repo")
    cli = CliTools({"cliTools": {"git": {"allow": ["log", "status"], "cwd": str(repo)}}}).start()
    catalog = ToolCatalog.of(ToolRegistry().include(cli.tool_specs()))
    described = catalog.execute_description()
    assert (
        "class GitTools:" in described
        and "    def status(self, *args: str, **flags: Any) -> dict[str, Any]:" in described
    )
    assert "max_count: int" not in described and not any(s.loaded for s in cli.tool_specs())
    stubs = catalog.stubs(["git.status"])
    assert "porcelain: bool | str | None = None" in stubs and "usage: git status" in stubs
