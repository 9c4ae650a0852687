"""The workload's tools for our engine (a ``ToolRegistry`` module): the same three as the
peers' (``tah_agent.py``, ``pai_agent.py``) and the floor's, each waiting the tools' delay
and counted where it runs (``tool_hooks``)."""

from bench.peers import tool_hooks
from codemode.activities import tool


async def noop(i: int) -> int:
    """Returns its argument after the tools' delay."""
    await tool_hooks.called()
    return i


async def echo(text: str) -> str:
    """Returns its argument: a call that carries a payload both ways."""
    await tool_hooks.called()
    return text


@tool(requires_approval=True)
async def send_report(to: str, body: str) -> str:
    """Sends nothing: a call that parks its execution until a person approves it."""
    await tool_hooks.called()
    return f"sent {len(body)} characters to {to}"
