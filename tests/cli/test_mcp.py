"""`--mcp-config`: MCP servers' tools listed by `codemode tools`, served by `codemode worker`
next to a tools module, called by `codemode run`; a bad configuration is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import Background, codemode
from tests.mcp.servers import reference_server


@pytest.fixture(scope="module")
def mcp_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mcp") / "mcp.json"
    entry = reference_server("everything", tools={"include": ["get-sum", "echo"]})
    entry["command"] = entry["command"].replace(str(Path(entry["command"]).parent), "${MCP_BIN}")
    path.write_text(json.dumps({"mcpServers": {"everything": entry}}))
    return path


@pytest.fixture(scope="module")
def env(cli_env: dict[str, str], mcp_config: Path) -> dict[str, str]:
    from tests.mcp.servers import npm_bin

    return {**cli_env, "MCP_BIN": str(npm_bin())}


async def test_tools_lists_mcp_tools_with_ids_policies_and_stubs(env, mcp_config: Path) -> None:
    res = await codemode("tools", "--tools", "examples.tools", "--mcp-config", str(mcp_config), env=env)
    assert res.rc == 0, res
    assert "# 6 tools from examples.tools and MCP servers everything (runtime: monty)" in res.out
    assert "#   everything.get_sum       mcp:everything/get-sum  no approval: read-only;" in res.out
    assert "send_email               requires approval" in res.out
    assert "class EverythingTools:" in res.out and "\neverything: EverythingTools" in res.out
    assert "    def get_sum(self, a: float, b: float) -> Any:" in res.out


async def test_a_bad_configuration_is_a_usage_error(env, mcp_config: Path, tmp_path: Path) -> None:
    res = await codemode("tools", "--mcp-config", str(mcp_config), env={k: v for k, v in env.items() if k != "MCP_BIN"})
    assert res.rc == 2 and "server 'everything': everything.command names ${MCP_BIN}, which is not set" in res.err, res
    # The same checks in this process (each `codemode` start costs seconds): what they print.
    from codemode.activities import ToolRegistry
    from codemode.activities.mcp_tools import load_mcp_config
    from codemode.worker.tool_sources import Tools, ToolSourceError, ToolSources
    from examples import tools as example_tools

    entry = json.loads(mcp_config.read_text())["mcpServers"]["everything"]
    entry["command"] = entry["command"].replace("${MCP_BIN}", env["MCP_BIN"])
    clash = load_mcp_config({"mcpServers": {"everything": {**entry, "namespace": "get_weather"}}})
    with pytest.raises(
        ToolSourceError,
        match=r"tool 'mcp:everything/\S+' \(get_weather\.\w+ from MCP server 'everything'\) collides with tool 'get_weather'",
    ):
        await Tools(ToolSources(), ToolRegistry.from_module(example_tools), clash).start_mcp()
    broken = load_mcp_config({"mcpServers": {"gone": {"command": str(tmp_path / "no-such-server")}}})
    with pytest.raises(ToolSourceError, match="gone: could not be started: .*No such file"):
        await Tools(ToolSources(), None, broken).start_mcp()


async def test_worker_serves_mcp_tools_beside_a_tools_module(env, mcp_config: Path, tmp_path: Path) -> None:
    worker = await Background(
        "worker", "--tools", "examples.tools", "--mcp-config", str(mcp_config), env=env, log=tmp_path / "worker.log"
    ).start("Worker ready", timeout=60)
    try:
        assert "everything.get_sum" in worker.output()
        code = tmp_path / "code.py"
        code.write_text("w = get_weather('Paris')\ns = everything.get_sum(a=w['temp_c'], b=1)\ns\n")
        res = await codemode("run", str(code), "--json", env=env)
        assert res.rc == 0, res
        outcome = json.loads(res.out)
        assert outcome["output"] == "The sum of 18 and 1 is 19."
        assert [c["tool"] for c in outcome["tool_calls"]] == ["get_weather", "mcp:everything/get-sum"]
    finally:
        assert await worker.stop() == 0, worker.output()
