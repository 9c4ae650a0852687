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
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _edits(asked: dict[str, Any], approved: dict[str, Any]) -> str:
    """``amount=90 (asked 900)``: the arguments a person changed."""
    changed = [k for k in approved if asked.get(k, object()) != approved[k]]
    return (
        ", ".join(
            f"{k}={_short(approved[k], 60)}" + (f" (asked {_short(asked[k], 60)})" if k in asked else " (added)")
            for k in changed
        )
        or "no change"
    )
