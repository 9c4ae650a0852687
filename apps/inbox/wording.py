"""The inbox's words: how a decision reads (who, how, through what), a refusal said as a
sentence rather than an exception's name, and times as people say them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from codemode.client.histories.decisions import ApprovalAudit, edits_in_brief

#: Where a decision came from, as a sentence ends: "approved by ana in the inbox".
THROUGH = {
    "inbox": "in the inbox",
    "link": "through a link in a message",
    "cli": "from the command line",
    "mcp": "from an MCP client",
    "pydantic-ai": "from the agent's app",
    "signal": "with a Temporal signal",
    "ui": "in the Temporal web UI",
    "policy": "by a policy rule of the approvers file",
}

_EXCEPTION_NAME = re.compile(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Refused)):\s*")


def how_to_sign_in(proxy: bool, tokens: bool) -> str:
    """What the sign-in page says, for how this inbox knows people."""
    ways = []
    if proxy:
        ways.append("open the inbox through your team's sign-in page (the address your team gave you)")
    if tokens:
        ways.append("sign in with the token you were given (whoever runs the inbox hands them out)")
    if not ways:
        return "This inbox knows nobody yet: whoever runs it gives it a users file or a sign-in proxy."
    return "To get in, " + ", or ".join(ways) + "."


def through(door: str | None) -> str:
    """``in the inbox``, ``from the command line``... ("" when unknown)."""
    if not door:
        return ""
    return THROUGH.get(door, f"through {door}")


def decision_sentence(approval: ApprovalAudit) -> str:
    """``approved by ana in the inbox``, ``denied by bo from the command line: not now``,
    ``answered by ana instead of the tool``."""
    who = approval.by or "someone"
    verb = "answered" if approval.answered else approval.decision
    text = f"{verb} by {who}"
    if approval.answered:
        text += " instead of the tool"
    if where := through(approval.door):
        text += f" {where}"
    if edited := edits_in_brief(approval):
        text += f" ({edited})"
    if approval.comment:
        text += f": {approval.comment}"
    return text


def refusal(text: str) -> str:
    """A refusal as a person reads it: no exception class in front ("ValueError: ..."), a
    full stop at the end."""
    text = str(text).strip()
    while True:
        shorter = _EXCEPTION_NAME.sub("", text)
        if shorter == text:
            break
        text = shorter
    return text if text.endswith((".", "!", "?", ")")) else text + "."


def json_problem(err: json.JSONDecodeError) -> str:
    """Where JSON went wrong, in words: ``at line 2, column 14, a comma or a closing brace is missing``."""
    what = {
        "Expecting ',' delimiter": "a comma or a closing brace is missing",
        "Expecting property name enclosed in double quotes": "a name in double quotes is expected (a comma too many?)",
        "Expecting value": "a value is missing (text goes in double quotes)",
        "Expecting ':' delimiter": "a colon is missing after a name",
        "Extra data": "there is more after the end of the value",
        "Unterminated string starting at": "a text is not closed with a double quote",
        "Invalid control character at": "a line break inside a text (write \\n)",
    }.get(err.msg, err.msg[:1].lower() + err.msg[1:])
    return f"at line {err.lineno}, column {err.colno}, {what}"


def ago(when: datetime | None, now: datetime | None = None) -> str:
    """``just now``, ``3 min ago``, ``2 h ago``, ``4 d ago``; ``in 5 min`` for the future."""
    if when is None:
        return ""
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    future = seconds < 0
    span = _span(abs(seconds))
    if span is None:
        return "just now"
    return f"in {span}" if future else f"{span} ago"


def _span(seconds: float) -> str | None:
    if seconds < 45:
        return None
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours = seconds / 3600
    if hours < 24:
        return f"{round(hours)} h"
    return f"{round(hours / 24)} d"
