"""Tools for ``bench/agent_workload.py``: as cheap as a tool can be, and one a person approves."""

from codemode.activities import tool


async def noop(i: int) -> int:
    return i


async def echo(text: str) -> str:
    """Returns its argument: a call that carries a payload both ways."""
    return text


@tool(requires_approval=True)
async def send_report(to: str, body: str) -> str:
    """Sends nothing: a call that parks its execution until a person approves it."""
    return f"sent {len(body)} characters to {to}"
