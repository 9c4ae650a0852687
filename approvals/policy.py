"""The policy rules' condition language: small, readable, evaluated on the host (the worker
reads the rules from its own file; nothing the code or a model sends can reach them).

``when = { to = { endswith = "@ourco.com" }, amount = { le = 100 } }``: every named argument's
condition must hold. A condition is a value (equality) or a table of operators, all of which
must hold: ``equals``, ``not_equals``, ``in``, ``not_in``, ``startswith``, ``endswith``,
``contains``, ``matches`` (a regular expression, whole value), ``lt``, ``le``, ``gt``, ``ge``,
``exists``. ``startswith``/``endswith`` take a string or a list (any of them). An argument that
is a list satisfies a condition when every item does (``to = ["a@ourco.com", "b@ourco.com"]``).
An argument the call did not pass satisfies nothing but ``exists = false``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

OPERATORS = frozenset(
    {
        "equals",
        "not_equals",
        "in",
        "not_in",
        "startswith",
        "endswith",
        "contains",
        "matches",
        "lt",
        "le",
        "gt",
        "ge",
        "exists",
    }
)
_MISSING = object()


class ConditionError(ValueError):
    """A condition the file cannot mean (an unknown operator, a bad regular expression)."""


def check_condition(where: str, cond: Any) -> None:
    """Refuse a malformed condition when the file is read (not when a call arrives)."""
    if not isinstance(cond, dict):
        return  # a plain value: equality
    unknown = sorted(set(cond) - OPERATORS)
    if unknown:
        raise ConditionError(
            f"{where}: unknown operator(s) {', '.join(unknown)} (known: {', '.join(sorted(OPERATORS))})"
        )
    if "matches" in cond:
        try:
            re.compile(str(cond["matches"]))
        except re.error as err:
            raise ConditionError(f"{where}: matches: not a regular expression: {err}") from None
    for op in ("in", "not_in"):
        if op in cond and not isinstance(cond[op], list):
            raise ConditionError(f"{where}: {op} takes a list")


def holds(when: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """Whether every argument condition of ``when`` holds for the call's named arguments."""
    return all(_holds(cond, arguments.get(name, _MISSING)) for name, cond in when.items())


def _holds(cond: Any, value: Any) -> bool:
    if not isinstance(cond, dict):
        cond = {"equals": cond}
    if "exists" in cond and bool(cond["exists"]) != (value is not _MISSING):
        return False
    ops = {k: v for k, v in cond.items() if k != "exists"}
    if not ops:
        return True
    if value is _MISSING:
        return False
    if isinstance(value, (list, tuple)) and not any(op in ("equals", "not_equals", "contains") for op in ops):
        return bool(value) and all(_all_ops(ops, item) for item in value)
    return _all_ops(ops, value)


def _all_ops(ops: Mapping[str, Any], value: Any) -> bool:
    return all(_op(op, arg, value) for op, arg in ops.items())


def _op(op: str, arg: Any, value: Any) -> bool:
    try:
        if op == "equals":
            return bool(value == arg)
        if op == "not_equals":
            return bool(value != arg)
        if op == "in":
            return value in arg
        if op == "not_in":
            return value not in arg
        if op in ("startswith", "endswith"):
            options = arg if isinstance(arg, list) else [arg]
            return isinstance(value, str) and any(getattr(value, op)(str(o)) for o in options)
        if op == "contains":
            return arg in value
        if op == "matches":
            return isinstance(value, str) and re.fullmatch(str(arg), value) is not None
        if op in ("lt", "le", "gt", "ge"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return False
            return {"lt": value < arg, "le": value <= arg, "gt": value > arg, "ge": value >= arg}[op]
    except TypeError:
        return False
    return False
