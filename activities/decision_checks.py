"""Checks of what a person decides beyond yes or no: arguments edited before approving, and a
value given instead of running the tool. Pure functions of JSON schemas (the ones the sandbox
step recorded with the call), so the workflow's Update validator runs them deterministically
and every door (CLI, inbox, MCP) can run the same before it sends anything.

Errors are ``ValueError`` worded for a person: which argument, what is wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema

#: A decision's edited arguments or answer, as JSON, at most this big (it is written into the
#: workflow history with the decision).
MAX_DECISION_BYTES = 256 * 1024


def approved_arguments(
    schema: Mapping[str, Any] | None, asked: Mapping[str, Any], edits: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments a call runs with once approved with ``edits``: the asked ones with the
    edited keys replaced, checked against the tool's parameters ``schema``. Raises ValueError."""
    if not isinstance(edits, Mapping):
        raise ValueError("edited arguments must be an object: parameter name -> value")
    _size("the edited arguments", edits)
    merged = {**asked, **edits}
    if schema:
        props = schema.get("properties")
        if isinstance(props, Mapping) and schema.get("additionalProperties") is False:
            unknown = [k for k in edits if k not in props]
            if unknown:
                raise ValueError(
                    f"unknown argument(s) {', '.join(map(repr, unknown))}; the tool takes: {', '.join(props) or 'none'}"
                )
        _check(schema, merged, "argument")
    return merged


def check_answer(schema: Mapping[str, Any] | None, value: Any) -> None:
    """A person's answer given instead of the tool must fit what the tool returns."""
    _size("the answer", value)
    if schema:
        _check(schema, value, "answer")


def _size(what: str, value: Any) -> None:
    try:
        size = len(json.dumps(value, default=str))
    except (TypeError, ValueError) as err:
        raise ValueError(f"{what} is not JSON: {err}") from None
    if size > MAX_DECISION_BYTES:
        raise ValueError(f"{what} is {size} bytes of JSON, over the {MAX_DECISION_BYTES} bytes a decision may carry")


def _check(schema: Mapping[str, Any], value: Any, what: str) -> None:
    validator = jsonschema.Draft202012Validator(dict(schema))
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return
    problems = []
    for err in errors[:5]:
        where = ".".join(str(p) for p in err.absolute_path)
        if what == "argument":
            label = f"argument {where!r}" if where else "arguments"
        else:
            label = f"answer at {where!r}" if where else "answer"
        problems.append(f"{label}: {err.message}")
    raise ValueError("; ".join(problems))
