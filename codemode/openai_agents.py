"""Durable code mode for the OpenAI Agents SDK: ``run_code_tool()``, an async ``FunctionTool``
whose every run is a durable execution on Temporal, inside a workflow
(``temporalio.openai_agents``) or outside one (the SDK's ``needs_approval`` and ``RunState``)::

    from agents import Agent
    from codemode.openai_agents import run_code_tool

    agent = Agent(name="coder", tools=[run_code_tool("my_tools")])

Needs the ``openai-agents`` extra: ``pip install 'durable-codemode[openai-agents]'``.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in an environment without it
    raise ImportError(
        "codemode.openai_agents needs the OpenAI Agents SDK: pip install 'durable-codemode[openai-agents]'"
    ) from exc

from .integrations.openai_agents import execution_id_of, run_code_tool, snippet_tool
from .integrations.snippet_tools import SnippetTool, snippet_tools

__all__ = ["SnippetTool", "execution_id_of", "run_code_tool", "snippet_tool", "snippet_tools"]
