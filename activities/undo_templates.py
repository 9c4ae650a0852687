"""Compensations of MCP and CLI tools, declared in their configs (issue 47): another tool of the
same server (or another subcommand of the same command), with arguments taken from the call and
its result.

```json
"tools": {"settings": {"write_file": {"compensate": {
    "tool": "move_file",
    "arguments": {"source": "{args.path}", "destination": "/trash/{execution_id}-{call_id}"}}}}}
```

An argument's value is JSON; in a string, ``{args.NAME}`` (the call's argument by the name the code
uses), ``{result}`` or ``{result.KEY.KEY}`` (its result; an index for a list), ``{call_id}`` and
``{execution_id}`` are put in. A string that is one placeholder keeps the value's type
(``"{args.amount}"`` is a number). A placeholder may end with a filter: ``|basename``, ``|dirname``,
or ``|re:PATTERN`` (the first group of the first match, or the whole match; a pattern may not
contain braces). ``approval`` (``always``/``never``; default: as the compensating tool's own),
``max_attempts`` and ``timeout`` (seconds) are the compensation's own policy.

The compensating tool runs as that tool does (its validation, its idempotency rules, its
timeout), inside the compensation's activity, so its idempotency key is the compensation's
(``<execution>/<call>/compensate``).
"""

from __future__ import annotations

import os
import posixpath
import re
from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .tools import Compensation, ToolSpec, current_call

PLACEHOLDER = re.compile(r"\{(args|result|call_id|execution_id)((?:\.[^{}|.]+)*)(?:\|([^{}]*))?\}")
FILTERS = ("basename", "dirname")


class UndoTemplateError(ValueError):
    """A compensation's arguments cannot be filled in from the call (the message says which)."""


class CompensateConfig(BaseModel):
    """``compensate`` in an MCP tool's settings or a CLI command's config."""

    model_config = ConfigDict(extra="forbid")

    #: The compensating tool: as the server lists it, or a subcommand the command allows.
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    approval: Literal["always", "never"] | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)

    @field_validator("arguments")
    @classmethod
    def _placeholders(cls, value: dict[str, Any]) -> dict[str, Any]:
        for text in _strings(value):
            for m in PLACEHOLDER.finditer(text):
                _check_filter(m.group(3))
            rest = PLACEHOLDER.sub("", text)
            if "{" in rest or "}" in rest:
                raise ValueError(
                    f"{text!r}: a brace that is no placeholder ({{args.NAME}}, {{result.KEY}}, {{call_id}}, "
                    "{execution_id}, with an optional |basename, |dirname or |re:PATTERN)"
                )
        return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _check_filter(name: str | None) -> None:
    if name is None or name in FILTERS:
        return
    if name.startswith("re:"):
        try:
            re.compile(name[3:])
        except re.error as err:
            raise ValueError(f"|{name}: not a regular expression: {err}") from None
        return
    raise ValueError(f"|{name}: unknown filter (basename, dirname, re:PATTERN)")


def fill(template: Any, context: dict[str, Any]) -> Any:
    """The template with the call's values put in (``UndoTemplateError`` when one is missing)."""
    if isinstance(template, dict):
        return {k: fill(v, context) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, context) for v in template]
    if not isinstance(template, str):
        return template
    whole = PLACEHOLDER.fullmatch(template)
    if whole is not None:
        return _value(whole, context)
    return PLACEHOLDER.sub(lambda m: str(_value(m, context)), template)


def _value(m: re.Match[str], context: dict[str, Any]) -> Any:
    root, path, how = m.group(1), m.group(2), m.group(3)
    value: Any = context[root]
    walked = root
    for key in [p for p in path.split(".") if p]:
        walked += f".{key}"
        if isinstance(value, dict) and key in value:
            value = value[key]
        elif isinstance(value, list) and key.isdigit() and int(key) < len(value):
            value = value[int(key)]
        else:
            raise UndoTemplateError(f"{m.group(0)}: the call has no {walked}")
    if how is None:
        return value
    text = str(value)
    if how == "basename":
        return posixpath.basename(text.rstrip("/")) or os.sep
    if how == "dirname":
        return posixpath.dirname(text.rstrip("/"))
    found = re.search(how[3:], text)
    if found is None:
        raise UndoTemplateError(f"{m.group(0)}: {how[3:]!r} does not match {text[:200]!r}")
    return found.group(1) if found.groups() else found.group(0)


def configured_compensation(config: CompensateConfig, compensating: ToolSpec, requires_approval: bool) -> Compensation:
    """The compensation a config declares: ``compensating`` called with the filled-in arguments.
    ``requires_approval``: the default when the config does not say (the compensating tool's own)."""

    async def undo(args: dict[str, Any], result: Any) -> Any:
        call = current_call()
        context = {"args": args, "result": result, "call_id": call.call_id, "execution_id": call.execution_id}
        try:
            arguments = fill(config.arguments, context)
        except UndoTemplateError as err:
            raise ValueError(f"the compensation {compensating.code_name}(...) cannot be filled in: {err}") from None
        await compensating.invoke([], arguments)
        return True

    approval = requires_approval if config.approval is None else config.approval == "always"
    return Compensation(
        fn=undo,
        max_attempts=config.max_attempts or compensating.options.max_attempts,
        timeout=timedelta(seconds=config.timeout) if config.timeout else compensating.options.timeout,
        non_retryable=compensating.options.non_retryable,
        requires_approval=approval,
        label=compensating.code_name,
    )
