"""Approval as a function of the call for tools described by a config (MCP servers' tools, CLI
commands): ``approval_when``, a list of conditions on the call's arguments, any of which sends
the call to a person::

    "approval_when": [{"argument": "amount", "op": ">", "value": 500},
                      {"argument": "to", "op": "not_endswith", "value": "@example.com"}]

One spelling of the one condition language (``approvals/conditions.py``, where every operator
is defined once, with ``[[policy]] when``): ``matches`` is a whole-value match there too
(``search`` finds a pattern anywhere). The conditions are judged on the validated arguments the
tool runs with; an ``approval_when`` is an ``ask`` rule, so a condition that cannot be judged
sends the call to a person. Like ``@tool(requires_approval=predicate)``, the rules run on the
host in the step's activity and what they said is recorded with the call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from codemode.approvals import conditions


class Condition(BaseModel):
    """An ``approval_when`` entry as a config spells it (``{"argument", "op", "value"}``)."""

    model_config = ConfigDict(extra="forbid")

    argument: str
    op: str
    value: Any = None

    @model_validator(mode="after")
    def _usable(self) -> Condition:
        try:
            self.condition()
        except conditions.ConditionError as err:
            raise ValueError(str(err)) from None
        return self

    def condition(self) -> conditions.Condition:
        """The condition in the one language."""
        return conditions.Condition.make(self.argument, self.op, self.value)

    def __str__(self) -> str:
        return str(self.condition())


class ApprovalRules:
    """Conditions any of which sends a call to a person (``ToolSpec.approval_rules``)."""

    def __init__(self, entries: list[Condition]) -> None:
        self.conditions = entries

    def decide(self, arguments: Mapping[str, Any]) -> tuple[bool, str | None]:
        """Whether the call (its validated arguments by name) waits for a person, and why."""
        verdict = conditions.judge((c.condition() for c in self.conditions), arguments, "ask", combine="any")
        if verdict.unjudged:
            return True, f"approval_when: {verdict.unjudged}, so a person decides"
        return (True, f"approval_when: {verdict.because}") if verdict.matched else (False, None)

    def __str__(self) -> str:
        return " or ".join(str(c) for c in self.conditions)
