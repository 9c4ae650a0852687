"""An MCP server's listed tools as tool specs: names, aliases and canonical ids, collisions,
stubs from JSON Schema, argument checks, and policy from annotations (only tightened)."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.types import Tool, ToolAnnotations

from codemode.activities import ToolRegistry
from codemode.activities.mcp_tools import load_mcp_config
from codemode.activities.mcp_tools.servers import _schema_check
from codemode.activities.mcp_tools.specs import McpToolError, build_specs
from codemode.runtimes import render_stubs


def tool(name: str, props: dict[str, Any] | None = None, required: list[str] | None = None, **kw: Any) -> Tool:
    schema = {"type": "object", "properties": props or {}, "required": required or []}
    return Tool(name=name, input_schema=schema, **kw)


def specs(server: str, listed: list[Tool], **entry: Any):
    config = load_mcp_config({"mcpServers": {server: {"command": "x", **entry}}}).servers[server]
    return build_specs(server, config, listed, lambda s: _noop, _schema_check)


async def _noop(**kwargs: Any) -> Any:
    return kwargs


RO = ToolAnnotations(read_only_hint=True)
SAFE_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False)
IDEMPOTENT_DELETE = ToolAnnotations(destructive_hint=True, idempotent_hint=True)


def test_names_aliases_and_canonical_ids() -> None:
    listed = [
        tool("get-sum", {"a": {"type": "number"}, "first-name": {"type": "string"}, "from": {"type": "string"}}, ["a"]),
        tool("import", {}),
    ]
    got = {s.name: s for s in specs("my-server", listed)}
    add = got["mcp:my-server/get-sum"]
    assert add.code_name == "my_server.get_sum" and add.tool == "get-sum"
    assert [p.name for p in add.signature.parameters] == ["a", "first_name", "from_"]
    assert add.wire_names == {"first_name": "first-name", "from_": "from"}
    assert got["mcp:my-server/import"].code_name == "my_server.import_"
    add.validate([1], {"first_name": "Ada", "from_": "x"})  # checked under the server's own names
    with pytest.raises(ValueError, match=r"my_server.get_sum\(\): argument 'first-name': 3 is not of type 'string'"):
        add.validate([1], {"first_name": 3})
    with pytest.raises(TypeError, match=r"my_server.get_sum\(\) missing 1 required positional argument: 'a'"):
        add.validate([], {})


def test_stub_from_json_schema() -> None:
    listed = [
        tool(
            "create_entities",
            {
                "entities": {
                    "type": "array",
                    "description": "what to create",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}},
                        },
                        "required": ["name"],
                    },
                },
                "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                "limit": {"type": "integer"},
            },
            ["entities"],
            description="Create entities.",
            output_schema={"type": "object", "properties": {"created": {"type": "integer"}}, "required": ["created"]},
        )
    ]
    (spec,) = specs("memory", listed)
    stubs = render_stubs([spec.signature])
    assert "class MemoryTools:" in stubs and "\nmemory: MemoryTools" in stubs
    assert (
        "    def create_entities(self, entities: list[dict[str, Any]], mode: Literal['fast', 'safe'] = 'safe', "
        "limit: int = ...) -> dict[str, Any]:" in stubs
    )
    assert "entities: list of {name: str, tags?: list[str]} -- what to create" in stubs
    assert "Returns: {created: int}" in stubs
    compile(stubs, "<stubs>", "exec")


@pytest.mark.parametrize(
    ("annotations", "approval", "idempotent"),
    [
        (None, True, False),  # the spec's defaults: destructive, not idempotent
        (RO, False, True),
        (SAFE_WRITE, False, False),
        (IDEMPOTENT_DELETE, True, True),
        (ToolAnnotations(read_only_hint=True, destructive_hint=True), False, True),  # read-only wins
    ],
)
def test_policy_from_annotations(annotations, approval: bool, idempotent: bool) -> None:
    (spec,) = specs("s", [tool("t", annotations=annotations)])
    assert spec.options.requires_approval is approval
    assert spec.idempotent is idempotent
    assert ("TimeoutError" in spec.options.non_retryable) is not idempotent


def test_configuration_overrides_and_only_tightens() -> None:
    listed = [
        tool("read", annotations=RO),
        tool("delete", annotations=IDEMPOTENT_DELETE),
        tool("note", annotations=SAFE_WRITE),
    ]
    got = {
        s.tool: s
        for s in specs(
            "s",
            listed,
            approval="always",
            max_attempts=5,
            tools={"settings": {"delete": {"approval": "never", "idempotent": False, "timeout": 5, "private": True}}},
        )
    }
    assert got["read"].options.requires_approval and got["note"].options.requires_approval  # server: always
    delete = got["delete"]
    assert not delete.options.requires_approval and not delete.idempotent  # the tool's own settings win
    assert (delete.options.max_attempts, delete.options.timeout.total_seconds(), delete.options.private_data) == (
        5,
        5.0,
        True,
    )
    assert "approval: never (configured)" in delete.policy_notes


def test_include_exclude_and_unknown_names() -> None:
    listed = [tool("read_a"), tool("read_b"), tool("write")]
    assert [s.tool for s in specs("s", listed, tools={"include": ["read_*"], "exclude": ["read_b"]})] == ["read_a"]
    with pytest.raises(McpToolError, match="tools.exclude names 'wirte', which the server does not list"):
        specs("s", listed, tools={"exclude": ["wirte"]})
    with pytest.raises(McpToolError, match="tools.settings names 'nope'"):
        specs("s", listed, tools={"settings": {"nope": {"approval": "always"}}})


def test_collisions_fail_loudly_naming_both() -> None:
    with pytest.raises(McpToolError, match=r"'mcp:s/get-sum' and 'mcp:s/get_sum' would both be s.get_sum"):
        specs("s", [tool("get-sum"), tool("get_sum")])
    assert [
        s.code_name
        for s in specs("s", [tool("get-sum"), tool("get_sum")], tools={"settings": {"get_sum": {"alias": "add"}}})
    ] == ["s.get_sum", "s.add"]
    with pytest.raises(McpToolError, match="would hide Python's own 'print'"):
        specs("print", [tool("t")])
    assert specs("print", [tool("t")], namespace="printer")[0].code_name == "printer.t"

    def memory() -> str:
        return "a Python tool named like the namespace"

    registry = ToolRegistry([memory])
    with pytest.raises(
        ValueError, match=r"tool 'mcp:memory/t' \(memory.t from MCP server 'memory'\) collides with tool 'memory'"
    ):
        registry.include(specs("memory", [tool("t")]))
    registry = ToolRegistry().include(specs("a", [tool("t")], namespace="shared"))
    with pytest.raises(
        ValueError, match=r"tool 'mcp:b/t' \(shared.t from MCP server 'b'\) collides with tool 'mcp:a/t'"
    ):
        registry.include(specs("b", [tool("t")], namespace="shared"))


def test_allow_list_by_id_code_name_or_namespace() -> None:
    registry = ToolRegistry().include(specs("m", [tool("a-b"), tool("c")]))
    assert list(registry.select(["m"])) == ["mcp:m/a-b", "mcp:m/c"]
    assert list(registry.select(["m.a_b"])) == ["mcp:m/a-b"]
    assert list(registry.select(["mcp:m/c"])) == ["mcp:m/c"]
    with pytest.raises(KeyError, match="unknown tool"):
        registry.select(["m.nope"])


def test_async_setting_declares_async_tools() -> None:
    got = {
        s.tool: s
        for s in specs("s", [tool("a"), tool("b")], **{"async": True, "tools": {"settings": {"b": {"async": False}}}})
    }
    assert got["a"].signature.stub(method=True).startswith("async def a(self)")
    assert not got["b"].signature.is_async


def test_approval_when_conditions_decide_call_by_call() -> None:
    """``approval_when``: the same tool waits for a person for some arguments only (issue 36)."""
    listed = [tool("pay", {"to": {"type": "string"}, "amount": {"type": "number"}}, ["to", "amount"], annotations=RO)]
    when = [
        {"argument": "amount", "op": ">", "value": 500},
        {"argument": "to", "op": "not_endswith", "value": ".example"},
    ]
    (pay,) = specs("bank", listed, tools={"settings": {"pay": {"approval_when": when}}})
    assert not pay.options.requires_approval
    assert pay.needs_approval({"to": "a.example", "amount": 20}) == (False, None)
    assert pay.needs_approval({"to": "a.example", "amount": 900}) == (True, "approval_when: amount > 500")
    assert pay.needs_approval({"to": "evil.org", "amount": 1})[0]
    assert pay.needs_approval({"to": "a.example", "amount": "x"})[0]  # cannot compare: a person decides
    assert pay.policy_notes[0] == "approval when amount > 500 or to not_endswith '.example' (configured)"
    with pytest.raises(Exception, match="approval_when"):
        specs("bank", listed, approval_when=[{"argument": "amount", "op": "~", "value": 1}])
