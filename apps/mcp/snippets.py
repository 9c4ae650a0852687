"""Saved snippets at the MCP front (issue 48).

* Each saved snippet (its newest version when the server starts) is a tool of its own,
  ``snippet_NAME``, whose input schema is the snippet's parameters: calling it runs one durable
  execution that is nothing but that snippet's call (so a grant signed over its version counts
  on every runtime), answered like ``execute``. The snippets are in ``search``, ``get_schema``
  and ``execute``'s stubs too (``snippets.NAME(...)``), and ``execute`` runs the very versions
  listed (their hashes are pinned in each request).
* Saving is a person's act, so it is no tool: MCP tools are model-controlled, prompts are
  user-controlled (the person picks one in the client, a slash command; the model cannot call
  one). ``save_snippet`` is a prompt: the person names a run that worked and the snippet's name;
  the server promotes it as the person this server runs for (``CODEMODE_APPROVER``, signing with
  their key) and the prompt's message says what was saved.
"""

from __future__ import annotations

import inspect
import logging
import os
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations

from codemode.activities.snippets.library import SnippetLibrary
from codemode.activities.snippets.models import SavedSnippet, SnippetError
from codemode.client.snippets import call_code, promote
from codemode.storage.encryption import Keyring

log = logging.getLogger(__name__)

#: A snippet's tool: ``snippet_weekly_report``.
TOOL_PREFIX = "snippet_"
_JSON_TO_PYTHON: dict[str, Any] = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "array": list,
    "object": dict,
}


async def saved_snippets(namespace: str) -> list[SavedSnippet]:
    """The newest version of every saved snippet (none when the store cannot be read: the
    server still serves its tools, and says why in its log)."""
    from codemode.worker.converter import default_store

    try:
        library = SnippetLibrary(await default_store(), namespace, keys=Keyring.from_env())
        return await library.newest()
    except Exception as err:  # noqa: BLE001 - snippets are an extra: never a reason not to serve
        log.warning("saved snippets not offered: %s", err)
        return []


def _parameters(saved: SavedSnippet) -> list[inspect.Parameter]:
    sig = saved.snippet.signature(saved.version)
    props = saved.snippet.parameters.get("properties") or {}
    out = []
    for p in sig.parameters:
        kind = props.get(p.name, {}).get("type") if isinstance(props.get(p.name), dict) else None
        annotation = _JSON_TO_PYTHON.get(kind, Any) if isinstance(kind, str) else Any
        default = inspect.Parameter.empty
        if not p.required:
            default = (props.get(p.name) or {}).get("default")
            annotation = annotation | None if annotation is not Any else Any
        out.append(inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return out


def add_snippet_tools(server: MCPServer, snippets: list[SavedSnippet], executions: Any, answer: Any) -> None:
    """One tool per snippet: its schema, its docstring; a call runs it as one execution."""
    for saved in snippets:
        params = _parameters(saved)

        async def run(ctx: Context, __saved: SavedSnippet = saved, **arguments: Any) -> Any:
            code = call_code(__saved, arguments)
            try:
                got = await executions.execute(ctx, code, None, snippets={__saved.name: __saved.version})
            except Exception as err:
                if type(err).__name__ in ("BadInput", "TemporalUnavailable"):
                    raise ToolError(str(err)) from None
                raise
            return await answer(got)

        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
        run.__signature__ = inspect.Signature([context, *params])  # type: ignore[attr-defined]
        run.__annotations__ = {"ctx": Context, **{p.name: p.annotation for p in params}}
        run.__name__ = f"{TOOL_PREFIX}{saved.name}"
        doc = saved.snippet.description.strip() or f"The saved snippet {saved.name}."
        server.add_tool(
            run,
            name=f"{TOOL_PREFIX}{saved.name}",
            description=(
                f"{doc}\n\nSaved snippet {saved.ref}, promoted by {saved.provenance.promoted_by}: runs durably as "
                "one execution; its tool calls are approved like any code's (or run under its signed grant)."
            ),
            annotations=ToolAnnotations(title=f"Snippet {saved.name}", read_only_hint=False, open_world_hint=True),
        )
        registered = server._tool_manager.get_tool(f"{TOOL_PREFIX}{saved.name}")  # noqa: SLF001
        if registered is not None:  # show the snippet's own schema (descriptions, enums, defaults)
            registered.parameters = saved.snippet.parameters


def add_save_prompt(server: MCPServer, executions: Any) -> None:
    """``save_snippet``: the person promotes a run (a prompt: the model cannot pick it)."""

    async def save_snippet(execution_id: str, name: str, description: str = "") -> str:
        from codemode.client.signing import signer_from_env

        try:
            signer = signer_from_env()
        except ValueError as err:
            return f"Not saved: {err}"
        if os.environ.get("CODEMODE_APPROVERS") and signer is None:
            return "Not saved: an approvers file is in use; set CODEMODE_APPROVER (and its key) for this server."
        backend = await executions._connected()  # noqa: SLF001
        try:
            saved, new = await promote(
                backend.client,
                execution_id,
                name,
                description=description or None,
                by=os.environ.get("CODEMODE_USER") or None,
                signer=signer,
            )
        except SnippetError as err:
            return f"Not saved: {err}"
        what = "Saved" if new else "Already saved as"
        return (
            f"{what} snippet {saved.ref} from {execution_id} (promoted by {saved.provenance.promoted_by}). "
            f"Code can call it as snippets.{saved.name}(...); restart the MCP server to offer it as a tool."
        )

    server.prompt(
        name="save_snippet",
        title="Save a run as a snippet",
        description=(
            "Save an execution that worked as a named, versioned snippet (you promote it; the model cannot). "
            "Arguments: execution_id, name, and an optional description."
        ),
    )(save_snippet)


__all__ = ["CallToolResult", "InputRequiredResult", "add_save_prompt", "add_snippet_tools", "saved_snippets"]
