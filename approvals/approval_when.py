"""Approval as a function of the call for tools described by a config (MCP servers' tools, CLI
commands): ``approval_when``, a list of simple conditions on the call's arguments, any of
which sends the call to a person::

    "approval_when": [{"argument": "amount", "op": ">", "value": 500},
                      {"argument": "to", "op": "not_endswith", "value": "@example.com"}]

Operators: ``==``, ``!=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``not_in``, ``contains``,
``startswith``, ``endswith``, ``not_endswith``, ``matches`` (a regular expression, searched),
``present``, ``absent``. A condition that cannot be evaluated (an argument of the wrong type)
sends the call to a person, the safe side. Like ``@tool(requires_approval=predicate)``, the
rules run on the host in the step's activity and what they said is recorded with the call."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

Op = Literal[
    "==",
    "!=",
    ">",
    ">=",
    "<",
    "<=",
    "in",
    "not_in",
    "contains",
    "startswith",
    "endswith",
    "not_endswith",
    "matches",
    "present",
    "absent",
]

_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "in": lambda a, v: a in v,
    "not_in": lambda a, v: a not in v,
    "contains": lambda a, v: v in a,
    "startswith": lambda a, v: str(a).startswith(v),
    "endswith": lambda a, v: str(a).endswith(v),
    "not_endswith": lambda a, v: not str(a).endswith(v),
    "matches": lambda a, v: re.search(v, str(a)) is not None,
}


class Condition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    argument: str
    op: Op
    value: Any = None

    @model_validator(mode="after")
    def _usable(self) -> Condition:
        if self.op in ("in", "not_in") and not isinstance(self.value, list):
            raise ValueError(f"{self.op} takes a list as value")
        if self.op == "matches":
            try:
                re.compile(str(self.value))
            except re.error as err:
                raise ValueError(f"matches: not a regular expression: {err}") from None
        return self

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        if self.op == "present":
            return self.argument in arguments
        if self.op == "absent":
            return self.argument not in arguments
        if self.argument not in arguments:
            return False
        return bool(_OPS[self.op](arguments[self.argument], self.value))

    def __str__(self) -> str:
        tail = "" if self.op in ("present", "absent") else f" {self.value!r}"
        return f"{self.argument} {self.op}{tail}"


class ApprovalRules:
    """Conditions any of which sends a call to a person (``ToolSpec.approval_rules``)."""

    def __init__(self, conditions: list[Condition]) -> None:
        self.conditions = conditions

    def decide(self, arguments: Mapping[str, Any]) -> tuple[bool, str | None]:
        for c in self.conditions:
            try:
                if c.holds(arguments):
                    return True, f"approval_when: {c}"
            except Exception as err:  # noqa: BLE001 - cannot tell: a person decides
                return (
                    True,
                    f"approval_when: {c} could not be checked ({type(err).__name__}: {err}), so a person decides",
                )
        return False, None

    def __str__(self) -> str:
        return " or ".join(str(c) for c in self.conditions)
