"""Which attempt of a tool call this is, and whether the attempt before it sent nothing.

A tool with side effects (an MCP tool that is not idempotent, a CLI command such as
``git commit``) must not run twice for one call. Temporal starts a second attempt after a
worker died mid-call or the attempt timed out, and then nobody knows whether the first one
ran. The rule both sources follow: an attempt that failed *before* it sent anything says so
in its heartbeat details (``note_unsent``); a later attempt of a non-idempotent tool runs
only when the attempt before it left that note (``previous_attempt_unsent``).
"""

from __future__ import annotations

import contextvars
from typing import Any

from temporalio import activity

from .tools import ToolFailure, current_call

#: The notes the attempt being served has left so far (one heartbeat carries them all: the
#: server keeps only the last heartbeat's details for the next attempt).
_notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("codemode_attempt_notes", default=None)
#: The note every attempt that failed in the open leaves (an exception, not a lost worker):
#: the next attempt knows the one before it ended, and whether any before that was lost.
ENDED = "ended"
LOST = "lost"


def attempt() -> int:
    """The attempt being served (1 outside a tool activity)."""
    try:
        return current_call().attempt
    except LookupError:
        return 1


def note(key: str, value: Any) -> None:
    """Leave a note for the next attempt of this call (with the others this attempt left)."""
    if not activity.in_activity():
        return
    notes = _notes.get()
    if notes is None:
        notes = {}
        _notes.set(notes)
    notes[key] = value
    activity.heartbeat(dict(notes))


def begin_attempt() -> None:
    """A fresh set of notes for the attempt being served (the tool activity calls it first)."""
    _notes.set({})


def note_unsent(key: str, number: int) -> None:
    """Record that attempt ``number`` sent nothing (under ``key``: ``mcp_unsent``, ``cli_unsent``)."""
    note(key, number)


def earlier_attempt_lost(number: int) -> bool:
    """Whether an attempt before ``number`` was lost mid-way (its worker died, or it overran its
    timeout) rather than failing in the open: then the call may have been applied by it."""
    if number <= 1 or not activity.in_activity():
        return False
    details = activity.info().heartbeat_details
    notes = details[0] if details and isinstance(details[0], dict) else {}
    return notes.get(ENDED) != number - 1 or bool(notes.get(LOST))


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
            indeterminate=True,
        )
    return number
