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


def conform_answer(schema: Mapping[str, Any] | None, value: Any) -> Any:
    """A checked answer as the tool would have returned it, by its returns schema (pydantic's
    ``TypeAdapter(return hint).json_schema()`` for a Python tool, an MCP tool's
    ``outputSchema``): a whole number where the tool returns a float becomes one (``0`` ->
    ``0.0``), and ``3.0`` where it returns an int becomes ``3``, at any depth (objects,
    arrays, tuples, ``$ref``, the first fitting branch of ``anyOf``/``oneOf``). Anything
    else is kept as given. Pure and deterministic: the workflow runs it on the answer."""
    if not schema:
        return value
    return _conform(schema, value, schema, 0)


def _conform(schema: Any, value: Any, root: Mapping[str, Any], depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > 64:
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        value = _conform(target, value, root, depth + 1)
    for part in schema.get("allOf") or []:
        value = _conform(part, value, root, depth + 1)
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key) or []
        fitting = [b for b in branches if isinstance(b, Mapping) and _fits(b, value, root)]
        if fitting:
            value = _conform(fitting[0], value, root, depth + 1)
    types = schema.get("type")
    types = {types} if isinstance(types, str) else set(types or [])
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and "number" in types and "integer" not in types:
        return float(value)
    if isinstance(value, float) and value.is_integer() and "integer" in types and "number" not in types:
        return int(value)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        return {k: _conform(props.get(k, extra), v, root, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        prefix = schema.get("prefixItems") or []
        items = schema.get("items")
        return [_conform(prefix[i] if i < len(prefix) else items, v, root, depth + 1) for i, v in enumerate(value)]
    return value


def _fits(branch: Mapping[str, Any], value: Any, root: Mapping[str, Any]) -> bool:
    """Whether ``value`` fits one branch (its ``$ref`` resolved against the root's ``$defs``)."""
    defs = {k: root[k] for k in ("$defs", "definitions") if k in root}
    return jsonschema.Draft202012Validator({**defs, **branch}).is_valid(value)


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
