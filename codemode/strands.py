"""Durable code mode for Strands Agents: ``run_code_tool()``, an async ``@tool(context=True)``
whose every run is a durable execution on Temporal, inside a workflow
(``temporalio.strands_agents``) or outside one (Strands' interrupts)::

    from strands import Agent
    from codemode.strands import run_code_tool

    agent = Agent(tools=[run_code_tool("my_tools")])

Needs the ``strands`` extra, in an environment without the ``mcp`` extra (Strands pins
``mcp<2``): ``pip install 'durable-codemode[strands]'``.
"""

from __future__ import annotations

try:
    import strands  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in an environment without it
    raise ImportError(
        "codemode.strands needs Strands Agents: pip install 'durable-codemode[strands]' "
        "(in an environment without the mcp extra: Strands pins mcp<2)"
    ) from exc

from .integrations.strands import INTERRUPT_NAME, run_code_tool, snippet_tool
from .integrations.snippet_tools import SnippetTool, snippet_tools

__all__ = ["INTERRUPT_NAME", "SnippetTool", "run_code_tool", "snippet_tool", "snippet_tools"]
