"""Durable code mode for pydantic-ai agents: ``DurableCodeMode``, a capability that gives an
agent one ``run_code`` tool whose every run is a durable execution on Temporal.

    from pydantic_ai import Agent
    from codemode.pydantic_ai import DurableCodeMode   # the public name of this package

    agent = Agent("openai:gpt-5", capabilities=[DurableCodeMode("my_tools")])

Needs the ``pydantic-ai`` extra: ``pip install 'durable-codemode[pydantic-ai]'``.
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by a test in a venv without it
    raise ImportError(
        "codemode.pydantic_ai needs pydantic-ai: pip install 'durable-codemode[pydantic-ai]' "
        "(or pip install 'pydantic-ai-slim[temporal]>=2.62')"
    ) from exc

from .capability import DurableCodeMode
from .returns import RunCodeReturn, run_code_return

__all__ = ["DurableCodeMode", "RunCodeReturn", "run_code_return"]
