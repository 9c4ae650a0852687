"""Compensations declared in MCP and CLI configs (issue 47): the arguments template, its
filters, and the checks that fail a config at load rather than at rollback."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from codemode.activities.cli_tools.config import CliConfigError, load_cli_config
from codemode.activities.mcp_tools.config import McpConfigError, load_mcp_config
from codemode.activities.tools import ToolRegistry, compensation, tool
from codemode.activities.undo_templates import CompensateConfig, UndoTemplateError, fill

CONTEXT = {
    "args": {"path": "/data/out/report.txt", "amount": 12},
    "result": {"id": "tx-9", "rows": [{"n": 1}], "stdout": "[main 1a2b3c4] say hello\n"},
    "call_id": "3",
    "execution_id": "exec-1",
}


def test_placeholders_keep_types_alone_and_join_as_text() -> None:
    assert fill("{args.amount}", CONTEXT) == 12
    assert fill({"n": "{result.rows.0.n}", "all": "{result}"}, CONTEXT) == {"n": 1, "all": CONTEXT["result"]}
    assert fill("/trash/{execution_id}-{call_id}-{args.path|basename}", CONTEXT) == "/trash/exec-1-3-report.txt"
    assert fill("{args.path|dirname}", CONTEXT) == "/data/out"
    assert fill("{result.stdout|re:([0-9a-f]+)\\]}", CONTEXT) == "1a2b3c4"
    assert fill(["{result.id}", True, 3], CONTEXT) == ["tx-9", True, 3]


def test_a_missing_value_says_which() -> None:
    with pytest.raises(UndoTemplateError, match="the call has no result.nope"):
        fill("{result.nope}", CONTEXT)
    with pytest.raises(UndoTemplateError, match="does not match"):
        fill("{result.id|re:^[0-9]+$}", CONTEXT)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"x": "{arg.path}"}, "a brace that is no placeholder"),
        ({"x": "{args.path|upper}"}, "unknown filter"),
        ({"x": "{args.path|re:(}"}, "not a regular expression"),
    ],
)
def test_a_bad_template_fails_the_load(arguments: dict, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        CompensateConfig(tool="undo", arguments=arguments)


def test_configs_check_what_a_compensation_names() -> None:
    with pytest.raises(CliConfigError, match="compensate.commit names 'revert', which is not in allow"):
        load_cli_config({"cliTools": {"git": {"allow": ["commit"], "compensate": {"commit": {"tool": "revert"}}}}})
    with pytest.raises(CliConfigError, match="compensate names 'push'"):
        load_cli_config(
            {"cliTools": {"git": {"allow": ["commit", "revert"], "compensate": {"push": {"tool": "revert"}}}}}
        )
    with pytest.raises(McpConfigError, match="compensate"):
        load_mcp_config(
            {"mcpServers": {"fs": {"command": "x", "tools": {"settings": {"w": {"compensate": {"tol": "m"}}}}}}}
        )


def test_python_tools_say_they_can_be_undone() -> None:
    def refund(args: dict, result: dict) -> None: ...

    @tool(compensate=compensation(refund, max_attempts=7, requires_approval=True))
    def pay(to: str, amount: int) -> dict:
        """Pays."""
        return {}

    def read(key: str) -> str:
        """Reads."""
        return key

    registry = ToolRegistry([pay, read])
    spec = registry["pay"].undo_spec()
    assert spec is not None
    assert (spec.activity, spec.label, spec.max_attempts, spec.requires_approval) == (
        "compensate:pay",
        "refund",
        7,
        True,
    )
    assert registry["read"].undo_spec() is None
    shown = registry.signatures()
    assert "Can be undone: a rollback runs its compensation (refund)." in shown["pay"].description
    assert "Can be undone" not in shown["read"].description
    with pytest.raises(ValueError, match="reconcile= goes with compensate="):
        tool(reconcile=lambda args: True)
