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

from .tools import ToolFailure, current_call


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


def refuse_a_repeat(name: str, key: str, *, what: str, not_again: str) -> int:
    """The attempt being served, after ``ToolFailure`` (``TimeoutError``, final) when it
    repeats one that may have run: the attempt before it got no answer and left no note
    that it sent nothing. For a tool that is not idempotent (``what``: "the tool"), the
    ``not_again`` words say what does not happen ("the call is not sent again")."""
    number = attempt()
    if number > 1 and not previous_attempt_unsent(key, number):
        raise ToolFailure(
            "TimeoutError",
            f"{name}: the previous attempt of this call got no answer (it timed out, or its worker stopped); "
            f"{what} is not idempotent and may have run, so {not_again}",
            retryable=False,
        )
    return number
