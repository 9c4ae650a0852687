"""Saved snippets from a client (issue 48): promote a run that worked, list, show and remove
them, grant (and revoke) the pre-approval of a version's calls, and the code that calls one.

Only a person promotes: this is what the CLI (``codemode save``), the inbox's run page and the
MCP front's ``save_snippet`` prompt (which the person picks, never the model) call; no surface
offered to a model does, and code in a sandbox has no way to save anything. The promoter is
named (``by``) and, with an approvers file in use, signs with their approver key: the workers
then run only snippets whose promoter's key the file lists."""

from __future__ import annotations

import ast
from datetime import UTC, datetime, timedelta
from typing import Any

import jsonschema
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from codemode.activities.snippets.compose import referenced
from codemode.activities.snippets.library import SnippetLibrary
from codemode.activities.snippets.models import (
    NAMESPACE,
    Provenance,
    SavedSnippet,
    Snippet,
    SnippetError,
    check_name,
    is_async_code,
)
from codemode.approvals.snippet_signing import SnippetGrant, sign_grant, sign_promotion
from codemode.client.histories.audit import fetch_audit
from codemode.client.requests import starter
from codemode.client.signing import Signer
from codemode.worker.converter import default_store, keyring_of, store_of

__all__ = [
    "SavedSnippet",
    "SnippetError",
    "call_code",
    "grant",
    "library_of",
    "promote",
    "remove",
    "revoke",
]

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


async def library_of(client: Client) -> SnippetLibrary:
    """The snippet library of the client's namespace, in the object store behind its converter."""
    store = store_of(client.data_converter) or await default_store()
    return SnippetLibrary(store, client.namespace, keys=keyring_of(client.data_converter))


def parameters_from(inputs: dict[str, Any]) -> dict[str, Any]:
    """A run's inputs as typed parameters: each its JSON type, all required."""
    props: dict[str, Any] = {}
    for name, value in inputs.items():
        kind = next((t for py, t in _JSON_TYPES.items() if type(value) is py), None)
        props[name] = {"type": kind} if kind else {}
    return {"type": "object", "properties": props, "required": list(inputs), "additionalProperties": False}


def _check_parameters(schema: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """A promoter's edited schema: an object of exactly the run's inputs (the code reads them by
    name), optional ones with a plain default, and the run's own inputs must fit it."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict):
        raise SnippetError('the parameter schema must be {"type": "object", "properties": {...}}')
    props = schema["properties"]
    if set(props) != set(inputs):
        raise SnippetError(
            f"the parameter schema must name exactly the run's inputs ({', '.join(inputs) or 'none'}), "
            f"not {', '.join(props) or 'none'}"
        )
    required = set(schema.get("required") or [])
    for name, prop in props.items():
        default = prop.get("default") if isinstance(prop, dict) else None
        if name not in required and not isinstance(default, (str, int, float, bool, type(None))):
            raise SnippetError(f"parameter {name!r} is optional: give it a plain default (text, number, true/false, null)")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(inputs, schema)
    except jsonschema.SchemaError as err:
        raise SnippetError(f"the parameter schema is invalid: {err.message}") from None
    except jsonschema.ValidationError as err:
        raise SnippetError(f"the run's own inputs do not fit the parameter schema: {err.message}") from None
    return schema


def _check_code(code: str) -> None:
    """What a run's code must be to become a function: no other snippet, no global names."""
    if referenced(code):
        raise SnippetError(f"the run calls saved snippets itself ({', '.join(referenced(code))}): a snippet cannot call another yet")
    tree = ast.parse(code)
    for node in tree.body:
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            raise SnippetError(f"line {node.lineno}: a snippet's code cannot declare global names")


def _description(code: str, execution_id: str) -> str:
    """The leading comment lines of the code, else where it came from."""
    lines = []
    for line in code.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return "\n".join(lines).strip() or f"Saved from execution {execution_id}."


async def promote(
    client: Client,
    execution_id: str,
    name: str,
    *,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    by: str | None = None,
    signer: Signer | None = None,
    require_signature: bool = False,
) -> tuple[SavedSnippet, bool]:
    """Save the code of ``execution_id`` (a run that completed) as the snippet ``name``: its
    inputs become typed parameters (``parameters``: the promoter's edited JSON schema), the
    tools its code names are recorded with their signatures' hashes, and the provenance says
    who promoted it (``signer`` signs; ``require_signature``: an approvers file is in use).
    Returns (the saved version, whether it is new: the same content is the same version)."""
    check_name(name)
    if require_signature and signer is None:
        raise SnippetError("an approvers file is in use: promote with your approver key (--by NAME, --key FILE)")
    try:
        audit = await fetch_audit(client, execution_id)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SnippetError(f"no execution {execution_id!r} on {client.namespace}") from None
        raise
    if audit.status != "completed" or not audit.success:
        why = audit.error.message if audit.error else audit.status
        raise SnippetError(f"only a run that completed can be promoted: {execution_id} did not ({why})")
    if audit.cell:
        raise SnippetError(f"{execution_id} is a session's cell: its code depends on what earlier cells left")
    if audit.tools_seen is None:
        raise SnippetError(f"{execution_id} was recorded before saved snippets existed: run its code again, then save that run")
    if NAMESPACE in audit.inputs:
        raise SnippetError(f"the run has an input named {NAMESPACE!r}: rename it")
    _check_code(audit.code)
    schema = _check_parameters(parameters, audit.inputs) if parameters is not None else parameters_from(audit.inputs)
    snippet = Snippet(
        name=name,
        description=description if description is not None else _description(audit.code, execution_id),
        code=audit.code,
        parameters=schema,
        tools=dict(audit.tools_seen),
        runtime=audit.runtime or "monty",
    )
    version = snippet.version()
    promoter = signer.name if signer is not None else (by or starter())
    at = datetime.now(UTC)
    provenance = Provenance(
        source_execution=execution_id,
        source_run=audit.run_id,
        promoted_by=promoter,
        promoted_at=at,
        signature=sign_promotion(
            signer.key, signer=signer.name, name=name, version=version, source_execution=execution_id, signed_at=at
        )
        if signer is not None
        else None,
    )
    library = await library_of(client)
    return await library.save(SavedSnippet(version=version, snippet=snippet, provenance=provenance))


async def remove(client: Client, name: str, version: str | None = None) -> list[str]:
    """Delete one version of ``name`` (its hash, or 8 characters of it) or all of them."""
    return await (await library_of(client)).remove(name, version)


async def grant(
    client: Client,
    name: str,
    signer: Signer,
    *,
    version: str | None = None,
    tools: list[str] | None = None,
    expires_in: timedelta | None = None,
    note: str = "",
) -> SnippetGrant:
    """``signer`` pre-approves the calls of one version of ``name`` (the newest when not given)
    to ``tools`` (default: every tool it calls), bound to that version's hash and parameter
    schema. Workers count it only when their approvers file lets ``signer`` decide those calls."""
    library = await library_of(client)
    saved = await library.find(name, version)
    chosen = tools if tools is not None else list(saved.snippet.tools)
    unknown = [t for t in chosen if t not in saved.snippet.tools]
    if unknown:
        raise SnippetError(f"snippet {saved.ref} does not call {', '.join(unknown)}: a grant covers only its own calls")
    signed = sign_grant(
        signer.key,
        signer=signer.name,
        name=saved.name,
        version=saved.version,
        parameters_schema=saved.snippet.parameters,
        tools=chosen,
        expires_at=datetime.now(UTC) + expires_in if expires_in is not None else None,
        note=note,
    )
    return await library.add_grant(signed)


async def revoke(client: Client, name: str, grant_id: str) -> bool:
    return await (await library_of(client)).revoke(name, grant_id)


def call_code(saved: SavedSnippet, arguments: dict[str, Any]) -> str:
    """The code that is nothing but one call of ``saved`` with these (JSON) arguments: what a
    snippet offered as a tool runs (the whole run is then the snippet's, on any runtime)."""
    shown = ", ".join(f"{k}={_literal(v)}" for k, v in arguments.items())
    call = f"{NAMESPACE}.{saved.name}({shown})"
    return f"await {call}" if is_async_code(saved.snippet.code) else call


def _literal(value: Any) -> str:
    text = repr(value)
    ast.literal_eval(text)  # JSON values only: raises for anything else
    return text
