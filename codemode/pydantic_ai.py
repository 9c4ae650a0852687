"""Durable code mode for pydantic-ai agents: ``DurableCodeMode``, a capability that gives an
agent one ``run_code`` tool whose every run is a durable execution on Temporal::

    from pydantic_ai import Agent
    from codemode.pydantic_ai import DurableCodeMode

    agent = Agent("openai:gpt-5", capabilities=[DurableCodeMode("my_tools")])

Needs the ``pydantic-ai`` extra: ``pip install 'durable-codemode[pydantic-ai]'``.
"""

from __future__ import annotations

from .integrations.pydantic_ai import DurableCodeMode, RunCodeReturn, run_code_return
from .integrations.snippet_tools import SnippetTool, snippet_tools

__all__ = ["DurableCodeMode", "RunCodeReturn", "SnippetTool", "run_code_return", "snippet_tools"]
