"""The approvers file's policy rules: ``[[policy]]`` entries that decide a call before anyone is
asked, in the one condition language (``approvals/conditions.py``), evaluated on the host (the
worker reads the rules from its own file; nothing the code or a model sends can reach them).

``when = { to = { endswith = "@ourco.com" }, amount = { le = 100 } }``: every named argument's
condition must hold. A condition is a value (equality) or a table of operators, all of which
must hold. The first rule (in file order) that matches decides: ``allow`` runs the call,
``deny`` refuses it, ``ask`` sends it to a person. Rules judge the validated arguments the tool
runs with; a condition that cannot be judged makes a ``deny``/``ask`` rule match and an
``allow`` rule not match (fail closed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from codemode.approvals import conditions
from codemode.approvals.conditions import OPERATORS, ConditionError, RuleKind  # noqa: F401 (re-exported)


def check_condition(where: str, cond: Any, argument: str = "argument") -> None:
    """Refuse a malformed condition when the file is read (not when a call arrives)."""
    conditions.from_table({argument: cond}, where)


def judge(when: Mapping[str, Any], arguments: Mapping[str, Any], kind: RuleKind) -> conditions.Judgement:
    """What a rule of ``kind`` with these conditions says of the call's validated arguments."""
    return conditions.judge(conditions.from_table(when), arguments, kind)


def holds(when: Mapping[str, Any], arguments: Mapping[str, Any], kind: RuleKind = "allow") -> bool:
    """Whether a rule of ``kind`` with these conditions matches (unjudged: fail closed)."""
    return judge(when, arguments, kind).matched
