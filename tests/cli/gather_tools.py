"""A tools module for the CLI tests: an async tool that needs approval, so code can park
on several approvals at once with ``asyncio.gather``."""

from __future__ import annotations

from codemode.activities import tool


@tool(requires_approval=True)
async def notify(who: str, text: str) -> dict:
    """Send someone a message. A person must approve each one."""
    return {"notified": who, "text": text}
