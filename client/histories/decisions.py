"""How a decision reads in the audit: the record of one approval or denial as the history
shows it (who, through which door, what was asked and what approved), and its sentence."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from codemode.workflows.models import ANONYMOUS


class ApprovalAudit(BaseModel):
    call_id: str
    decision: Literal["approved", "denied"]
    by: str | None = None
    comment: str | None = None
    at: datetime
    #: The Temporal client identity that sent the signal (process@host).
    identity: str = ""
    #: The door it came through (cli, inbox, link, mcp, pydantic-ai, signal).
    door: str | None = None
    #: What the call asked, and what a person approved instead (edited arguments).
    asked_arguments: dict[str, Any] | None = None
    approved_arguments: dict[str, Any] | None = None
    #: A person answered instead of the tool: the value the code got.
    answered: bool = False
    answer: Any = None


def approval_words(approval: ApprovalAudit) -> tuple[str, str, str]:
    """``(verb, " by who", ": why")`` of a decision: ``approved``, `` by ana``, ``, edited to
    amount=90 (asked 900): fine``; an answer reads ``answered instead of the tool``."""
    verb = "approved" if approval.decision == "approved" else "denied"
    who = approval.by or ANONYMOUS
    if who == ANONYMOUS and approval.identity:
        who = f"{ANONYMOUS} (sent by {approval.identity})"
    why = f": {approval.comment}" if approval.comment else ""
    if approval.answered:
        verb = "answered instead of the tool"
        why = f" with {_short(approval.answer)}{why}"
    elif approval.approved_arguments is not None:
        why = f", edited to {_edits(approval.asked_arguments or {}, approval.approved_arguments)}{why}"
    return verb, f" by {who}", why


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ArgumentChange(BaseModel):
    """One argument of an edited approval: what the call asked, and what it ran with."""

    name: str
    asked: Any = None
    approved: Any = None
    #: ``changed``, ``added`` (the person gave an argument the call left out), ``same``.
    kind: Literal["changed", "added", "same"]


def argument_changes(asked: dict[str, Any] | None, approved: dict[str, Any]) -> list[ArgumentChange]:
    """Every argument the call runs with, against what it asked: the diff a person reads (the
    inbox, ``codemode history``). ``1000`` and ``1000.0`` are the same value."""
    asked = asked or {}
    out = []
    for name, value in approved.items():
        if name not in asked:
            kind = "added"
        else:
            kind = "same" if asked[name] == value else "changed"
        out.append(ArgumentChange(name=name, asked=asked.get(name), approved=value, kind=kind))  # type: ignore[arg-type]
    return out


def _edits(asked: dict[str, Any], approved: dict[str, Any]) -> str:
    """``amount=90 (asked 900)``: the arguments a person changed."""
    return (
        ", ".join(
            f"{c.name}={_short(c.approved, 60)}"
            + (f" (asked {_short(c.asked, 60)})" if c.kind == "changed" else " (added)")
            for c in argument_changes(asked, approved)
            if c.kind != "same"
        )
        or "no change"
    )


def edits_in_brief(approval: ApprovalAudit) -> str:
    """``edited: amount 1200 → 1000``, for the line of the call that ran ("" when not edited)."""
    if approval.approved_arguments is None:
        return ""
    changes = [c for c in argument_changes(approval.asked_arguments, approval.approved_arguments) if c.kind != "same"]
    if not changes:
        return "edited: no change"
    return "edited: " + ", ".join(
        f"{c.name} {_short(c.asked, 40)} → {_short(c.approved, 40)}" if c.kind == "changed"
        else f"{c.name} added: {_short(c.approved, 40)}"
        for c in changes
    )


def call_with(tool: str, arguments: dict[str, Any], limit: int = 200) -> str:
    """``send_email(to='bo@example.com', ...)``: a call as it ran, named as summaries name calls."""
    text = f"{tool}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"
    return text if len(text) <= limit else text[: limit - 4] + "...)"
