"""Which attempt of a tool call this is, and whether the attempt before it sent nothing.

A tool with side effects (an MCP tool that is not idempotent, a CLI command such as
``git commit``) must not run twice for one call. Temporal starts a second attempt after a
worker died mid-call or the attempt timed out, and then nobody knows whether the first one
ran. The rule both sources follow: an attempt that failed *before* it sent anything says so
in its heartbeat details (``note_unsent``); a later attempt of a non-idempotent tool runs
only when the attempt before it left that note (``previous_attempt_unsent``).
"""

from __future__ import annotations

from temporalio import activity

from .tools import current_call


def attempt() -> int:
    """The attempt being served (1 outside a tool activity)."""
    try:
        return current_call().attempt
    except LookupError:
        return 1


def note_unsent(key: str, number: int) -> None:
    """Record that attempt ``number`` sent nothing (under ``key``: ``mcp_unsent``, ``cli_unsent``)."""
    if activity.in_activity():
        activity.heartbeat({key: number})


def previous_attempt_unsent(key: str, number: int) -> bool:
    """Whether the attempt before ``number`` left the note that it sent nothing."""
    if not activity.in_activity():
        return False
    details = activity.info().heartbeat_details
    return bool(details) and isinstance(details[0], dict) and details[0].get(key) == number - 1
