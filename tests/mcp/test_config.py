"""The --mcp-config file: the mcpServers format, ${VAR} expansion, checked policy keys."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.activities.mcp_tools import McpConfigError, load_mcp_config

ENV = {"TOKEN": "s3cret", "HOME": "/home/ada"}


def load(servers: dict, environ: dict | None = None):
    return load_mcp_config({"mcpServers": servers}, environ=ENV if environ is None else environ)


def test_stdio_and_http_servers_with_variables(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {"command": "npx", "args": ["-y", "server-memory"], "env": {"FILE": "${HOME}/m.jsonl"}},
                    "docs": {"url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                    "legacy": {"type": "sse", "url": "http://localhost:9/sse", "autoApprove": ["x"]},
                    "off": {"command": "nothing", "disabled": True},
                    "dflt": {"command": "x", "env": {"LEVEL": "${LEVEL:-info}"}},
                }
            }
        )
    )
    config = load_mcp_config(path, environ=ENV)
    assert list(config.servers) == ["memory", "docs", "legacy", "dflt"]  # disabled: left out
    memory, docs, legacy, dflt = config.servers.values()
    assert (memory.transport, memory.env) == ("stdio", {"FILE": "/home/ada/m.jsonl"})
    assert (docs.transport, docs.headers) == ("http", {"Authorization": "Bearer s3cret"})
    assert legacy.transport == "sse"  # another client's key (autoApprove) is accepted, not acted on
    assert dflt.env == {"LEVEL": "info"}
    assert config.describe("docs") == "https://docs.example/mcp"
    assert "s3cret" not in config.describe("docs") + repr(config.raw.get("memory"))


@pytest.mark.parametrize(
    ("servers", "message"),
    [
        ({"x": {"command": "a", "env": {"K": "${NOPE}"}}}, "x.env.K names ${NOPE}, which is not set"),
        ({"x": {"command": "a", "aproval": "never"}}, "aproval: Extra inputs are not permitted"),
        (
            {"x": {"command": "a", "approval": "sometimes"}},
            "approval: Input should be 'annotations', 'always' or 'never'",
        ),
        ({"x": {"command": "a", "idempotent": True}}, "can only be false"),
        ({"x": {"command": "a", "url": "http://h"}}, 'give either "command"'),
        ({"x": {}}, 'give either "command"'),
        ({"x": {"command": "a", "namespace": "my-ns"}}, "is not a Python identifier"),
        ({"x": {"command": "a", "tools": {"settings": {"t": {"alias": "1x"}}}}}, "is not a Python identifier"),
        ({"x": {"command": "a", "tools": {"settings": {"t": {"max_attempts": 0}}}}}, "greater than or equal to 1"),
        ({"a/b": {"command": "a"}}, "may not be empty or contain"),
    ],
)
def test_bad_entries_fail_loudly(servers: dict, message: str) -> None:
    with pytest.raises(McpConfigError, match="server") as err:
        load(servers)
    assert message in str(err.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(McpConfigError, match="no such file"):
        load_mcp_config(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(McpConfigError, match="not JSON"):
        load_mcp_config(bad)
    bad.write_text('{"servers": {}}')
    with pytest.raises(McpConfigError, match='expected an object with "mcpServers"'):
        load_mcp_config(bad)
