"""Durable code mode for LangGraph, LangChain and Deep Agents: ``run_code_tool()``, an async
LangChain tool whose every run is a durable execution on Temporal, inside a workflow
(``temporalio.langgraph``, ``temporalio.deepagents``) or outside one (``interrupt()``); and
``tools_node()``/``tools_condition`` for graphs under Temporal's plugin::

    from codemode.langgraph import run_code_tool, tools_condition, tools_node

    run_code = run_code_tool("my_tools")
    builder.add_node("tools", tools_node(run_code), metadata={"execute_in": "workflow"})
    builder.add_conditional_edges("model", tools_condition)

Needs the ``langgraph`` extra: ``pip install 'durable-codemode[langgraph]'``.
"""

from __future__ import annotations

try:
    import langchain_core  # noqa: F401
    import langgraph  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in an environment without it
    raise ImportError("codemode.langgraph needs LangGraph: pip install 'durable-codemode[langgraph]'") from exc

from .integrations.langgraph import run_code_tool, snippet_tool, tools_condition, tools_node
from .integrations.snippet_tools import SnippetTool, snippet_tools

__all__ = ["SnippetTool", "run_code_tool", "snippet_tool", "snippet_tools", "tools_condition", "tools_node"]
