"""Saved snippets as tools of their own, for every framework adapter (issue 48): the
framework-neutral part.

``await snippet_tools()`` reads the library (outside a workflow: when the agent is built) and
returns one ``SnippetTool`` per saved snippet, its newest version fixed: a name
(``snippet_NAME``), its docstring, its parameters' JSON schema. An adapter declares each in
its framework's shape (``codemode.openai_agents.snippet_tool``, ``.adk``, ``.langgraph``,
``.strands``, and ``DurableCodeMode(snippets=...)``); a call runs one execution that is nothing
but that snippet's call with the model's arguments (``SnippetTool.code``), the version pinned,
through the same ``RunCode`` paths as ``run_code`` (a child workflow inside a workflow, an
idempotent start outside one). A grant signed over that version then counts on every runtime.

The tools are plain data, fixed when the agent is built, so workflow code never reads the store
and a replayed agent sees the same tools; a snippet saved later is offered by the next agent
built (as ``snippets.NAME`` in ``run_code``'s code it is callable at once)."""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.runtimes.signatures import ToolSignature

#: A snippet's tool: ``snippet_weekly_report``.
TOOL_PREFIX = "snippet_"


@dataclass(frozen=True)
class SnippetTool:
    #: The tool's name (``snippet_weekly_report``).
    name: str
    snippet: str
    version: str
    description: str
    #: The JSON schema of its arguments (the snippet's parameters).
    parameters: dict[str, Any]
    is_async: bool = False
    #: The snippet's own docstring (the stub ``run_code``'s prompt shows).
    doc: str = ""

    def code(self, arguments: dict[str, Any]) -> str:
        """The code of one call with the model's (JSON) arguments."""
        shown = ", ".join(f"{k}={_literal(v)}" for k, v in arguments.items())
        call = f"snippets.{self.snippet}({shown})"
        return f"await {call}" if self.is_async else call

    def signature(self) -> ToolSignature:
        """How code sees it: ``snippets.NAME(...)``, typed from its parameters (its stub)."""
        from codemode.runtimes.signatures import signature_from_json_schema

        return signature_from_json_schema(
            f"snippet:{self.snippet}",
            self.parameters,
            description=f"{self.doc}\n\nSaved snippet, version {self.version[:12]}.".strip(),
            is_async=self.is_async,
            path=f"snippets.{self.snippet}",
            document=True,
        )

    @property
    def pins(self) -> dict[str, str]:
        """What the request pins: the very version this tool offers."""
        return {self.snippet: self.version}


#: A JSON type -> the Python type a framework that reads signatures is given.
JSON_TYPES: dict[str, Any] = {"integer": int, "number": float, "string": str, "boolean": bool, "array": list, "object": dict}


def python_parameters(tool: SnippetTool) -> list[inspect.Parameter]:
    """The snippet's parameters as keyword parameters of a Python function (JSON types as
    Python types, optional ones with their default): for frameworks that read a signature."""
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    out = []
    for name, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        annotation = JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any
        default = inspect.Parameter.empty if name in required else (prop or {}).get("default")
        out.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return out


def with_signature(fn: Any, tool: SnippetTool, *, leading: list[inspect.Parameter] = (), trailing: list[inspect.Parameter] = ()) -> Any:
    """``fn`` (which takes ``**arguments``) as a function of the snippet's parameters, named as
    the tool, its docstring the tool's description."""
    params = [*leading, *python_parameters(tool), *trailing]
    fn.__signature__ = inspect.Signature(params)
    fn.__annotations__ = {p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty}
    fn.__name__ = fn.__qualname__ = tool.name
    fn.__doc__ = tool.description
    return fn


def _literal(value: Any) -> str:
    text = repr(value)
    ast.literal_eval(text)  # JSON values only
    return text


async def snippet_tools(client: Client | None = None, *, names: list[str] | None = None) -> list[SnippetTool]:
    """One tool per saved snippet (``names``: only these), the newest version of each, read from
    the library of ``client``'s namespace (default: ``codemode.connect()``'s). Outside a workflow."""
    from codemode.activities.snippets.models import is_async_code
    from codemode.client.snippets import library_of

    if client is None:
        from codemode.worker.connection import connect

        client = await connect()
    library = await library_of(client)
    chosen = [await library.find(n) for n in names] if names is not None else await library.newest()
    return [
        SnippetTool(
            name=f"{TOOL_PREFIX}{s.name}",
            snippet=s.name,
            version=s.version,
            description=(s.snippet.description.strip() or f"The saved snippet {s.name}.")
            + f"\n\nSaved snippet {s.ref}: runs durably as one execution; its tool calls are approved like any code's.",
            parameters=s.snippet.parameters,
            is_async=is_async_code(s.snippet.code),
            doc=s.snippet.description.strip(),
        )
        for s in chosen
    ]
