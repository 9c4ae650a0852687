"""An MCP server's tools as ``ToolSpec``s: names, signatures, validation and policy.

Names (seed 004): a server's tools live in a namespace named after its key (``memory``),
each under a Python name (``get-sum`` -> ``get_sum``, a keyword gets a trailing ``_``), so
the code writes ``memory.read_graph()``. The tool's identity is its canonical id
``mcp:<server>/<tool as the server names it>``: the activity type, the name in every call
record, approval and audit line. Property names that are not Python names get aliases too
(``first-name`` -> ``first_name``), mapped back when the call is sent.

Policy from annotations, which are hints from a server that may not be trusted, so local
settings may only tighten them (``config.py``): approval unless the tool is read-only or
says it is not destructive (the spec's default for a tool that is not read-only is
destructive); a call is sent again after a lost answer only when the tool is read-only or
idempotent.
"""

from __future__ import annotations

import builtins
import fnmatch
import keyword
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from mcp.types import Tool

from codemode.approvals.approval_when import ApprovalRules, Condition
from codemode.runtimes.signatures import python_parameter_name, signature_from_json_schema

from ..tools import DEFAULT_NON_RETRYABLE, ToolOptions, ToolSpec
from .config import ServerConfig, ToolSettings

#: Default retry policy of an MCP tool (a tool's or server's settings override it).
DEFAULT_ATTEMPTS = 3
DEFAULT_TIMEOUT = 60.0


class McpToolError(ValueError):
    """A server's tools cannot be offered as listed (a name collision, a bad setting)."""


@dataclass
class McpToolSpec(ToolSpec):
    """A ``ToolSpec`` whose calls go to an MCP server."""

    server: str = ""
    #: The tool's name as the server lists it.
    tool: str = ""
    #: Python parameter name -> the property name the server expects.
    wire_names: dict[str, str] = field(default_factory=dict)
    #: A lost answer may be followed by a second call (read-only or idempotent, per the server).
    idempotent: bool = False
    has_output_schema: bool = False
    #: Why it needs approval or not, and how it is retried: for ``codemode tools``.
    policy_notes: list[str] = field(default_factory=list)


def canonical_id(server: str, tool: str) -> str:
    return f"mcp:{server}/{tool}"


def code_identifier(name: str) -> str:
    """A Python name for a server's or tool's name: ``get-sum`` -> ``get_sum``."""
    return python_parameter_name(name)


def namespace_for(server: str, config: ServerConfig) -> str:
    """The namespace the code reaches the server's tools by."""
    ns = config.namespace or code_identifier(server)
    if keyword.iskeyword(ns) or ns in vars(builtins):
        raise McpToolError(
            f"MCP server {server!r}: its namespace {ns!r} would hide Python's own {ns!r}; "
            f'give it another with "namespace" in its configuration'
        )
    return ns


def select_tools(server: str, config: ServerConfig, listed: list[Tool]) -> list[Tool]:
    """The listed tools the configuration lets through (``tools.include``/``exclude``).
    An exact name in the configuration that the server does not list fails loudly."""
    names = [t.name for t in listed]
    wanted = config.tools
    for where, entries in (
        ("include", wanted.include or []),
        ("exclude", wanted.exclude),
        ("settings", list(wanted.settings)),
    ):
        for entry in entries:
            if not any(ch in entry for ch in "*?[") and entry not in names:
                raise McpToolError(
                    f"MCP server {server!r}: tools.{where} names {entry!r}, which the server does not list "
                    f"(it lists: {', '.join(names) or 'no tools'})"
                )
    chosen = []
    for tool in listed:
        if wanted.include is not None and not any(fnmatch.fnmatchcase(tool.name, p) for p in wanted.include):
            continue
        if any(fnmatch.fnmatchcase(tool.name, p) for p in wanted.exclude):
            continue
        chosen.append(tool)
    return chosen


@dataclass(frozen=True)
class Policy:
    requires_approval: bool
    idempotent: bool
    max_attempts: int
    timeout: float
    private: bool
    notes: list[str]


def policy_for(tool: Tool, server: ServerConfig, settings: ToolSettings) -> Policy:
    """The tool's approval and retry policy: its annotations, then the configuration."""
    a = tool.annotations
    read_only = bool(a and a.read_only_hint is True)
    # The spec's defaults: destructiveHint true, idempotentHint false (both meaningful only
    # for a tool that is not read-only).
    destructive = not read_only and not (a and a.destructive_hint is False)
    idempotent = read_only or bool(a and a.idempotent_hint is True)
    approval = settings.approval or server.approval or "annotations"
    notes: list[str] = []
    if approval == "always":
        requires, why = True, "approval: always (configured)"
    elif approval == "never":
        requires, why = False, "approval: never (configured)"
    elif read_only:
        requires, why = False, "no approval: read-only"
    elif destructive:
        explicit = a is not None and a.destructive_hint is True
        requires, why = True, f"approval: destructive ({'annotated' if explicit else 'the default when not read-only'})"
    else:
        requires, why = False, "no approval: not destructive (annotated)"
    notes.append(why)
    if (settings.idempotent is False or server.idempotent is False) and idempotent:
        idempotent = False
        notes.append("not idempotent (configured)")
    attempts = settings.max_attempts or server.max_attempts or DEFAULT_ATTEMPTS
    timeout = settings.timeout or server.timeout or DEFAULT_TIMEOUT
    if attempts == 1:
        notes.append("never retried")
    elif idempotent:
        notes.append(f"retried up to {attempts} attempts ({'read-only' if read_only else 'idempotent'})")
    else:
        notes.append(f"retried only when the call was never sent (not idempotent), up to {attempts} attempts")
    private = bool(settings.private if settings.private is not None else server.private)
    if private:
        notes.append("private data")
    return Policy(requires, idempotent, attempts, timeout, private, notes)


def build_specs(
    server: str,
    config: ServerConfig,
    listed: list[Tool],
    make_call: Callable[[McpToolSpec], Callable[..., Any]],
    make_check: Callable[[McpToolSpec, dict[str, Any]], Callable[[dict[str, Any]], None] | None],
) -> list[McpToolSpec]:
    """The server's tools as specs. ``make_call(spec)``: the async function that calls the
    tool; ``make_check(spec, input_schema)``: its argument validator."""
    ns = namespace_for(server, config)
    specs: list[McpToolSpec] = []
    by_attr: dict[str, str] = {}
    for tool in select_tools(server, config, listed):
        settings = config.settings_for(tool.name)
        attr = settings.alias or code_identifier(tool.name)
        cid = canonical_id(server, tool.name)
        if attr in by_attr:
            raise McpToolError(
                f"MCP server {server!r}: tools {by_attr[attr]!r} and {cid!r} would both be {ns}.{attr} in the code; "
                f'rename one with "alias" in tools.settings'
            )
        by_attr[attr] = cid
        schema = dict(tool.input_schema or {"type": "object", "properties": {}})
        props = schema.get("properties") or {}
        aliases = {
            p: python_parameter_name(p) for p in props if not p.isidentifier() or keyword.iskeyword(p) or p == "self"
        }
        py_names = [aliases.get(p, p) for p in props]
        if len(set(py_names)) != len(py_names):
            raise McpToolError(
                f"MCP tool {cid!r}: two of its parameters have the same Python name ({', '.join(props)})"
            )
        try:
            signature = signature_from_json_schema(
                cid,
                schema,
                description=tool.description or "",
                returns_schema=tool.output_schema,
                path=f"{ns}.{attr}",
                aliases=aliases,
                document=True,
                is_async=settings.is_async if settings.is_async is not None else config.is_async,
            )
        except ValueError as err:
            raise McpToolError(f"MCP tool {cid!r}: {err}") from None
        policy = policy_for(tool, config, settings)
        non_retryable = DEFAULT_NON_RETRYABLE + (() if policy.idempotent else ("TimeoutError",))
        options = ToolOptions(
            requires_approval=policy.requires_approval,
            max_attempts=policy.max_attempts,
            timeout=timedelta(seconds=policy.timeout),
            non_retryable=non_retryable,
            name=cid,
            private_data=policy.private,
        )
        spec = McpToolSpec(
            name=cid,
            fn=_unset,
            options=options,
            signature=signature,
            origin=f"MCP server {server!r}",
            server=server,
            tool=tool.name,
            wire_names={v: k for k, v in aliases.items()},
            idempotent=policy.idempotent,
            has_output_schema=tool.output_schema is not None,
            policy_notes=policy.notes,
        )
        spec.fn = make_call(spec)
        spec.check = make_check(spec, schema)
        spec.returns_schema = tool.output_schema
        when = settings.approval_when if settings.approval_when is not None else config.approval_when
        if when:  # the configured conditions decide, call by call
            spec.options = replace(options, requires_approval=False)
            spec.approval_rules = ApprovalRules(
                _conditions(cid, when, aliases, py_names, own=settings.approval_when is not None)
            )
            notes = [n for n in policy.notes if not n.startswith(("approval", "no approval"))]
            spec.policy_notes = [f"approval when {spec.approval_rules} (configured)", *notes]
        specs.append(spec)
    return specs


def _conditions(
    cid: str, when: list[Condition], aliases: dict[str, str], py_names: list[str], *, own: bool
) -> list[Condition]:
    """The conditions as the calls are checked: by the parameters' Python names (a rule may
    name a parameter as the server does, ``first-name``), and, for a tool's own rules, only
    on parameters it has: a misspelt name would never hold, and the call would run without a
    person. (A server's rules apply to all its tools, so a parameter some lack is fine.)"""
    out = [c.model_copy(update={"argument": aliases.get(c.argument, c.argument)}) for c in when]
    unknown = [c.argument for c in out if c.argument not in py_names]
    if own and unknown and py_names:
        raise McpToolError(
            f"MCP tool {cid!r}: approval_when names {unknown[0]!r}, which is not one of its parameters "
            f"({', '.join(py_names)})"
        )
    return out


async def _unset(**kwargs: Any) -> Any:  # pragma: no cover - replaced before use
    raise RuntimeError("an MCP tool without its call")
