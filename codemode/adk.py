"""Durable code mode for Google ADK: ``run_code_tool()``, an async function tool whose every
run is a durable execution on Temporal, inside a workflow (``temporalio.google_adk``) or
outside one (ADK's tool confirmation)::

    from google.adk.agents import Agent
    from codemode.adk import run_code_tool

    agent = Agent(name="coder", model="gemini-2.5-flash", tools=[run_code_tool("my_tools")])

Needs the ``google-adk`` extra: ``pip install 'durable-codemode[google-adk]'``.
"""

from __future__ import annotations

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in an environment without it
    raise ImportError("codemode.adk needs Google ADK: pip install 'durable-codemode[google-adk]'") from exc

from .integrations.adk import run_code_tool, snippet_tool
from .integrations.snippet_tools import SnippetTool, snippet_tools

__all__ = ["SnippetTool", "run_code_tool", "snippet_tool", "snippet_tools"]
