"""``McpServers``: the configured MCP servers of one worker, and their tools as tool specs.

```python
servers = McpServers(load_mcp_config("mcp.json"))
await servers.start()                  # starts every server and lists its tools
registry = ToolRegistry.from_module("tools", mcp=servers)
worker = CodeModeWorker(client, registry, mcp=servers)   # closes them when it stops
```

Each call of an MCP tool is a tool activity like any other (summary, call id, retry policy,
timeout, approval); this module decides what its failures mean:

- the server could not be started or reached: nothing was sent, so the call is retried
  whatever the tool (``OSError``, retryable), and the attempt leaves a note in its
  heartbeat details saying so;
- an ``isError`` result: ``RuntimeError`` in the code with the server's message and the
  canonical id, not retried; invalid params: ``ValueError``; an unknown tool: ``NameError``;
  neither retried;
- the connection broke (``OSError``) or the call timed out (``TimeoutError``) after the
  request was sent: the outcome is unknown. An idempotent (or read-only) tool is retried; any other raises in the code
  instead of a blind second call. A later attempt of a non-idempotent tool (the worker died
  mid-call, or Temporal timed the attempt out) refuses to send the request again unless the
  attempt before it left the "not sent" note.

Exception types are ones every runtime knows (Monty has no ``ConnectionError``, so a
transport failure is its base, ``OSError``). Every request carries the call's idempotency
key (execution id / call id, the same on every attempt) in its ``_meta`` under
``codemode/idempotency-key``, for servers that can use it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from mcp import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from pydantic import ValidationError
from temporalio import activity

from codemode.runtimes.paths import data_dir

from .. import call_attempts
from ..checkpoints import CheckpointScope, CheckpointStore
from ..models import CheckpointRef
from ..tools import ToolFailure, current_call
from .config import McpConfig, load_mcp_config
from .pool import McpUnreachable, ServerPool
from .results import error_text, result_value
from .specs import McpToolError, McpToolSpec, build_specs

log = logging.getLogger(__name__)

#: JSON-RPC errors a second identical request cannot fix (besides invalid params and an
#: unknown method, which get their own exception types).
_FINAL_PROTOCOL_ERRORS = {
    PARSE_ERROR,
    INVALID_REQUEST,
    HEADER_MISMATCH,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
}
#: The exception an ``isError`` result raises when its text starts with a JSON-RPC code.
_ERROR_RESULT_TYPES = {f"MCP error {INVALID_PARAMS}": "ValueError", f"MCP error {METHOD_NOT_FOUND}": "NameError"}
#: The request ``_meta`` key carrying the call's idempotency key (``execution id/call id``,
#: the same on every attempt): a server that honours it can drop a repeated request.
IDEMPOTENCY_META_KEY = "codemode/idempotency-key"
#: Heartbeat detail an attempt leaves when its request was never sent.
UNSENT = "mcp_unsent"
#: Kind of the stored blobs behind result handles (``CheckpointScope.key``).
BLOB_KIND = "mcp"


class McpStartError(RuntimeError):
    """One or more servers could not be started, or their tools cannot be offered."""


class McpServers:
    """The servers of an MCP configuration, started together and closed together."""

    def __init__(
        self,
        config: McpConfig | str | os.PathLike[str] | Mapping[str, Any],
        *,
        log_dir: Path | None = None,
    ) -> None:
        self.config = config if isinstance(config, McpConfig) else load_mcp_config(config)
        self.pool = ServerPool(self.config, log_dir=log_dir if log_dir is not None else data_dir() / "mcp-logs")
        self._specs: list[McpToolSpec] = []
        self._store: CheckpointStore | None = None
        self.started = False

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> McpServers:
        """Start every server and list its tools. ``McpStartError`` names each server that
        failed (and why: its stderr's tail for a stdio server); none is left running then."""
        if self.started:
            return self
        names = list(self.config.servers)
        outcomes = await asyncio.gather(*(self._start_one(n) for n in names), return_exceptions=True)
        problems = [f"{n}: {o}" for n, o in zip(names, outcomes) if isinstance(o, BaseException)]
        if problems:
            await self.pool.aclose()
            raise McpStartError(f"{self.config.source}: " + "; ".join(problems))
        specs = [s for o in outcomes if isinstance(o, list) for s in o]
        seen: dict[str, str] = {}
        for spec in specs:
            ns = spec.signature.namespace or ""
            if seen.setdefault(ns, spec.server) != spec.server:
                await self.pool.aclose()
                raise McpStartError(
                    f"{self.config.source}: MCP servers {seen[ns]!r} and {spec.server!r} both use the namespace {ns!r}; "
                    'give one another with "namespace"'
                )
        self._specs = specs
        self.started = True
        return self

    async def _start_one(self, name: str) -> list[McpToolSpec]:
        try:
            listed = await self.pool.list_tools(name)
        except McpUnreachable as err:
            raise McpStartError(str(err).removeprefix(f"MCP server {name!r} ")) from None
        except MCPError as err:
            raise McpStartError(f"tools/list failed: {err}") from None
        try:
            return build_specs(name, self.config.servers[name], listed, self._caller, _schema_check)
        except McpToolError as err:
            raise McpStartError(str(err)) from None

    async def aclose(self) -> None:
        await self.pool.aclose()

    async def __aenter__(self) -> McpServers:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def use_store(self, checkpoints: CheckpointStore) -> None:
        """Where the bytes behind image, audio and blob handles go (the worker's object
        store, sealed under its keys); without one, handles carry ``ref: None``."""
        self._store = checkpoints

    # -- what it offers -------------------------------------------------------------------

    def tool_specs(self) -> list[McpToolSpec]:
        if not self.started:
            raise RuntimeError("McpServers.start() lists the servers' tools: await it first")
        return list(self._specs)

    @property
    def server_names(self) -> list[str]:
        return list(self.config.servers)

    async def read_content(self, handle: Mapping[str, Any]) -> bytes:
        """The bytes behind a result handle (``{"type": "image", "ref": ...}``)."""
        if self._store is None or not handle.get("ref"):
            raise LookupError("this handle's bytes are not in an object store this process can read")
        scope, ref = _parse_ref(str(handle["ref"]), int(handle.get("stored_size") or 0))
        return await self._store.load(scope, ref, kind=BLOB_KIND)

    # -- one call -------------------------------------------------------------------------

    def _caller(self, spec: McpToolSpec) -> Any:
        async def call_mcp_tool(**kwargs: Any) -> Any:
            return await self.call(spec, kwargs)

        call_mcp_tool.__name__ = spec.signature.attr
        return call_mcp_tool

    async def call(self, spec: McpToolSpec, kwargs: Mapping[str, Any]) -> Any:
        """Call the tool (arguments by their Python names); its result as a Python value, or
        ``ToolFailure`` saying what the code gets and whether the call may be retried."""
        if spec.idempotent:
            attempt = call_attempts.attempt()
        else:
            attempt = call_attempts.refuse_a_repeat(
                spec.name, UNSENT, what="the tool", not_again="the call is not sent again"
            )
        arguments = {spec.wire_names.get(k, k): v for k, v in kwargs.items()}
        seconds = spec.options.timeout.total_seconds()
        try:
            meta = {IDEMPOTENCY_META_KEY: current_call().idempotency_key}
        except LookupError:  # called outside a tool activity
            meta = None
        try:
            async with asyncio.timeout(seconds):
                result = await self.pool.call_tool(spec.server, spec.tool, arguments, meta)
        except McpUnreachable as err:
            call_attempts.note_unsent(UNSENT, attempt)
            raise ToolFailure("OSError", f"{spec.name}: {err}; the call was not sent", retryable=True) from None
        except TimeoutError:
            raise _unknown(spec, "TimeoutError", f"no answer within {seconds:g}s") from None
        except MCPError as err:
            raise _protocol_failure(spec, err) from None
        except ValidationError as err:
            raise ToolFailure(
                "RuntimeError", f"{spec.name}: the server answered with an invalid result: {err}", retryable=False
            ) from None
        except Exception as err:  # a transport failure mid-call
            raise _unknown(spec, "OSError", f"the call failed: {type(err).__name__}: {err}") from None
        if result.is_error:
            text = error_text(result)
            # The TypeScript SDK answers invalid arguments and unknown tools with an error
            # result that quotes the JSON-RPC code rather than with a JSON-RPC error.
            type_name = _ERROR_RESULT_TYPES.get(text.partition(":")[0].strip(), "RuntimeError")
            raise ToolFailure(type_name, f"{spec.name}: {text}", retryable=False)
        return await result_value(result, has_output_schema=spec.has_output_schema, save=self._saver())

    def _saver(self) -> Any:
        store = self._store
        if store is None or not activity.in_activity():
            return None
        info = activity.info()
        scope = CheckpointScope(info.workflow_namespace, info.workflow_id or "", info.workflow_run_id or "")

        async def save(data: bytes, mime_type: str) -> dict[str, Any]:
            ref = await store.save(scope, data, kind=BLOB_KIND)
            return {
                "sha256": hashlib.sha256(data).hexdigest(),
                "ref": scope.key(ref, BLOB_KIND),
                "stored_size": ref.size,
            }

        return save


def _unknown(spec: McpToolSpec, type_name: str, what: str) -> ToolFailure:
    """A failure after the request was sent: retried only for an idempotent tool."""
    if spec.idempotent:
        return ToolFailure(type_name, f"{spec.name}: {what}", retryable=True)
    return ToolFailure(
        type_name,
        f"{spec.name}: {what}; the request had been sent and the tool is not idempotent, "
        "so it may have run: not sent again",
        retryable=False,
        indeterminate=True,
    )


def _protocol_failure(spec: McpToolSpec, err: MCPError) -> ToolFailure:
    message = f"{spec.name}: {err.message}"
    if err.code == INVALID_PARAMS:
        return ToolFailure("ValueError", message, retryable=False)
    if err.code == METHOD_NOT_FOUND:
        return ToolFailure("NameError", message, retryable=False)
    if err.code in _FINAL_PROTOCOL_ERRORS:
        return ToolFailure("RuntimeError", message, retryable=False)
    if err.code in (CONNECTION_CLOSED, REQUEST_TIMEOUT):
        return _unknown(spec, "OSError", f"the connection to MCP server {spec.server!r} ended during the call")
    return _unknown(spec, "RuntimeError", f"the server failed: {err.message}")


def _schema_check(spec: McpToolSpec, schema: dict[str, Any]) -> Any:
    """A validator of a call's arguments against the tool's input schema (JSON Schema, the
    ``jsonschema`` library the MCP SDK brings): bad arguments are refused before the call
    is scheduled, as ``ValueError`` in the code, never sent and never retried."""
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except jsonschema.SchemaError as err:
        log.warning(
            "%s: the server's input schema is not valid JSON Schema (%s); arguments are not checked",
            spec.name,
            err.message,
        )
        return None

    def check(bound: dict[str, Any]) -> None:
        arguments = {spec.wire_names.get(k, k): v for k, v in bound.items()}
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        if errors:
            problems = []
            for e in errors[:3]:
                where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in e.absolute_path).lstrip(".")
                problems.append(f"argument {where!r}: {e.message}" if where else e.message)
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise ValueError(f"{spec.code_name}(): " + "; ".join(problems) + more)

    return check


def _parse_ref(key: str, stored_size: int) -> tuple[CheckpointScope, CheckpointRef]:
    """``codemode/ns/{ns}/wi/{id}/ri/{run}/mcp/{sha256}`` -> its scope and reference."""
    parts = key.split("/")
    if len(parts) != 9 or parts[0] != "codemode" or parts[7] != BLOB_KIND:
        raise LookupError(f"not a result handle's reference: {key!r}")
    ns, wid, rid = (unquote(parts[i]) for i in (2, 4, 6))
    scope = CheckpointScope(ns, "" if wid == "null" else wid, "" if rid == "null" else rid)
    return scope, CheckpointRef(sha256=parts[8], size=stored_size)
