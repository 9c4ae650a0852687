"""The one condition language of every rule of who decides what: a tool's ``approval_when``
(MCP servers' and CLI commands' configs) and the approvers file's ``[[policy]] when`` are two
spellings of it, read into the same ``Condition`` and judged by the same ``judge``.

A condition names an argument (``amount``; a dotted path reaches into an object argument,
``payment.amount``), an operator and a value. The operators, with their spellings:

==========================  ====================================================================
``equals`` (``==``)         the argument equals the value
``not_equals`` (``!=``)     it does not
``in``, ``not_in``          it is (not) one of the values (a list)
``contains``                the argument (a string or a list) contains the value
``startswith``,             the argument is a string that starts (ends) with the value (or one of
``endswith``,               the values, a list); ``not_endswith``: with none of them
``not_endswith``
``matches``                 the argument is a string the regular expression matches **whole**
                            (``re.fullmatch``: the pattern is anchored at both ends)
``search``                  the regular expression matches somewhere in the string
``lt`` ``le`` ``gt`` ``ge`` a comparison (``<`` ``<=`` ``>`` ``>=``) of two numbers (never a bool),
(``<`` ``<=`` ``>`` ``>=``) two strings or two dates
``exists`` (``present``,    whether the call passes the argument at all (``exists = false``)
``absent``)
==========================  ====================================================================

Rules are judged on the values the tool will run with: the call's arguments after the tool's
own validation (a string ``"20000"`` for an ``amount: int`` is judged as the number 20000, the
value the tool receives), defaults included.

A list argument is judged item by item, by what the rule does with a match: an ``allow`` rule
holds only when every item satisfies the condition (and the list is not empty), a ``deny`` or
``ask`` rule (and every ``approval_when``) matches when any item does. ``equals``,
``not_equals``, ``contains`` and ``exists`` look at the whole list.

**Fail closed.** A condition that cannot be judged (a comparison of a number with a string, a
string operator on a number, an argument path through something that is not an object) never
lets a call through: a ``deny`` or ``ask`` rule with such a condition counts as matched, an
``allow`` rule does not match. Pure: no I/O, nothing from temporalio."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from datetime import date, datetime, time
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel

RuleKind = Literal["allow", "deny", "ask"]

OPERATORS = frozenset(
    {
        "equals",
        "not_equals",
        "in",
        "not_in",
        "contains",
        "startswith",
        "endswith",
        "not_endswith",
        "matches",
        "search",
        "lt",
        "le",
        "gt",
        "ge",
        "exists",
    }
)
#: Other spellings of the same operators (``approval_when``'s symbols).
SPELLINGS = {"==": "equals", "!=": "not_equals", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
#: Operators that judge a list argument whole, not item by item.
_WHOLE = frozenset({"equals", "not_equals", "contains", "exists"})
_NUMBERS = (int, float, Decimal, Fraction)
_MISSING: Any = object()


class ConditionError(ValueError):
    """A condition a rule cannot mean (an unknown operator, a bad regular expression)."""


class CannotJudge(Exception):
    """A condition that cannot be judged for this value: the rule's kind decides (fail closed)."""


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition: ``argument op value``, in its one meaning."""

    argument: str
    op: str
    value: Any = None

    @classmethod
    def make(cls, argument: str, op: str, value: Any = None, *, where: str = "") -> Condition:
        """A checked condition (``ConditionError`` says what is wrong, prefixed by ``where``)."""
        prefix = f"{where}: " if where else ""
        if op == "present":
            op, value = "exists", True
        elif op == "absent":
            op, value = "exists", False
        op = SPELLINGS.get(op, op)
        if op not in OPERATORS:
            raise ConditionError(
                f"{prefix}unknown operator {op!r} (known: {', '.join(sorted([*OPERATORS, *SPELLINGS]))})"
            )
        if not isinstance(argument, str) or not argument:
            raise ConditionError(f"{prefix}a condition names an argument")
        if op in ("in", "not_in") and not isinstance(value, list):
            raise ConditionError(f"{prefix}{op} takes a list")
        if op in ("matches", "search"):
            try:
                re.compile(str(value))
            except re.error as err:
                raise ConditionError(f"{prefix}{op}: not a regular expression: {err}") from None
        if op in ("startswith", "endswith", "not_endswith"):
            options = value if isinstance(value, list) else [value]
            if not options or not all(isinstance(o, str) for o in options):
                raise ConditionError(f"{prefix}{op} takes a string or a list of strings")
        if op == "exists" and not isinstance(value, bool):
            raise ConditionError(f"{prefix}exists takes true or false")
        return cls(argument, op, value)

    def __str__(self) -> str:
        if self.op == "exists":
            return f"{self.argument} {'present' if self.value else 'absent'}"
        symbol = {v: k for k, v in SPELLINGS.items()}.get(self.op, self.op)
        return f"{self.argument} {symbol} {self.value!r}"


def from_table(when: Mapping[str, Any], where: str = "") -> list[Condition]:
    """``[[policy]] when``'s spelling: ``{argument: value}`` (equality) or ``{argument: {op:
    value, ...}}`` (every operator must hold) into conditions (all of which must hold)."""
    out: list[Condition] = []
    for argument, cond in when.items():
        place = f"{where}, argument {argument!r}" if where else f"argument {argument!r}"
        if not isinstance(cond, dict):
            out.append(Condition.make(argument, "equals", cond, where=place))
            continue
        if not cond:
            raise ConditionError(f"{place}: an empty condition")
        for op, value in cond.items():
            out.append(Condition.make(argument, op, value, where=place))
    return out


@dataclasses.dataclass(frozen=True)
class Judgement:
    """What a rule said of one call: whether it matched, and why in words (``because``), or
    why it could not tell (``unjudged``: then ``matched`` is the fail-closed answer)."""

    matched: bool
    because: str = ""
    unjudged: str = ""


def judge(
    conditions: Iterable[Condition], arguments: Mapping[str, Any], kind: RuleKind, *, combine: str = "all"
) -> Judgement:
    """Whether a rule of ``kind`` whose ``conditions`` hold together (``combine="all"``, a
    ``[[policy]] when``) or one at a time (``"any"``, an ``approval_when``) matches the call's
    validated ``arguments``. A condition that cannot be judged makes a ``deny``/``ask`` rule
    match and an ``allow`` rule not match."""
    conditions = list(conditions)
    results: list[tuple[Condition, bool]] = []
    for c in conditions:
        try:
            results.append((c, _condition(c, arguments, kind)))
        except CannotJudge as err:
            why = f"{c} could not be checked ({err})"
            return Judgement(matched=kind != "allow", because=why, unjudged=why)
    if combine == "any":
        hit = next((c for c, ok in results if ok), None)
        return Judgement(matched=hit is not None, because=str(hit) if hit is not None else "")
    matched = all(ok for _, ok in results)
    return Judgement(matched=matched, because=" and ".join(str(c) for c in conditions) if matched else "")


def _condition(c: Condition, arguments: Mapping[str, Any], kind: RuleKind) -> bool:
    value = lookup(arguments, c.argument)
    if c.op == "exists":
        return (value is not _MISSING) == bool(c.value)
    if value is _MISSING:
        return False  # an argument the call does not pass satisfies nothing but exists = false
    if c.op not in _WHOLE and isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if kind == "allow":
            return bool(items) and all(_op(c.op, c.value, item) for item in items)
        return any(_op(c.op, c.value, item) for item in items)
    return _op(c.op, c.value, value)


def lookup(arguments: Mapping[str, Any], path: str) -> Any:
    """The argument ``path`` names: an argument by its name, else a dotted path into objects
    (``payment.amount``). Missing: ``_MISSING``; a path through something not an object:
    ``CannotJudge``."""
    if path in arguments:
        return plain(arguments[path])
    head, dot, rest = path.partition(".")
    if not dot or head not in arguments:
        return _MISSING
    value: Any = plain(arguments[head])
    for part in rest.split("."):
        if not isinstance(value, Mapping):
            raise CannotJudge(f"{path}: {head} holds a {type(value).__name__}, not an object")
        if part not in value:
            return _MISSING
        value = plain(value[part])
    return value


def plain(value: Any) -> Any:
    """A validated value as rules read it: objects (pydantic models, dataclasses) as mappings."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="python")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _op(op: str, arg: Any, value: Any) -> bool:
    if op == "equals":
        return bool(value == arg)
    if op == "not_equals":
        return bool(value != arg)
    if op in ("in", "not_in"):
        try:
            inside = value in arg
        except TypeError as err:  # an unhashable value against a set-like list
            raise CannotJudge(str(err)) from None
        return inside if op == "in" else not inside
    if op == "contains":
        if isinstance(value, str):
            if not isinstance(arg, str):
                raise CannotJudge(f"a string cannot contain a {type(arg).__name__}")
            return arg in value
        if isinstance(value, (list, tuple, set, frozenset, dict)):
            return arg in value
        raise CannotJudge(f"contains needs a string or a list, not a {type(value).__name__}")
    if op in ("startswith", "endswith", "not_endswith"):
        if not isinstance(value, str):
            raise CannotJudge(f"{op} needs a string, not a {type(value).__name__}")
        options = arg if isinstance(arg, list) else [arg]
        fn = str.startswith if op == "startswith" else str.endswith
        hit = any(fn(value, o) for o in options)
        return not hit if op == "not_endswith" else hit
    if op in ("matches", "search"):
        if not isinstance(value, str):
            raise CannotJudge(f"{op} needs a string, not a {type(value).__name__}")
        pattern = re.compile(str(arg))
        return (pattern.fullmatch(value) if op == "matches" else pattern.search(value)) is not None
    if op in ("lt", "le", "gt", "ge"):
        if not _comparable(value, arg):
            raise CannotJudge(f"cannot compare a {type(value).__name__} with a {type(arg).__name__}")
        try:
            return {"lt": value < arg, "le": value <= arg, "gt": value > arg, "ge": value >= arg}[op]
        except (TypeError, ArithmeticError) as err:  # an aware and a naive datetime; a Decimal NaN
            raise CannotJudge(f"{type(err).__name__}: {err}") from None
    raise CannotJudge(f"unknown operator {op!r}")


def _comparable(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, _NUMBERS) and isinstance(b, _NUMBERS):
        return not any(_nan(x) for x in (a, b))  # NaN compares with nothing
    if isinstance(a, str) and isinstance(b, str):
        return True
    for kind in (datetime, date, time):  # (a datetime is a date: checked first)
        if isinstance(a, kind) or isinstance(b, kind):
            return isinstance(a, kind) and isinstance(b, kind)
    return False


def _nan(x: Any) -> bool:
    if isinstance(x, float):
        return math.isnan(x)
    return isinstance(x, Decimal) and x.is_nan()
