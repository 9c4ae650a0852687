"""What a notification says: the request a workflow makes (``NotifyRequest``, deterministic,
built in workflow code) and the JSON event a channel sends (``event_body``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

EventName = Literal["approval.requested", "approval.reminder", "approval.decided", "approval.expired"]
#: Lines of code shown either side of the call's line.
CONTEXT_LINES = 3


class CodeExcerpt(BaseModel):
    #: Line number of the first line shown.
    first: int = 1
    lines: list[str] = Field(default_factory=list)
    #: The call's line (None: unknown).
    line: int | None = None


class DecidedInfo(BaseModel):
    decision: str
    by: str | None = None
    door: str | None = None
    comment: str | None = None
    approved_arguments: dict[str, Any] | None = None
    answered: bool = False


class NotifyRequest(BaseModel):
    """One event about one call, as the execution workflow hands it to the notify workflow."""

    event: EventName
    execution_id: str
    call_id: str
    tool: str
    summary: str = ""
    arguments: dict[str, Any] | None = None
    code: CodeExcerpt = Field(default_factory=CodeExcerpt)
    asked_at: datetime | None = None
    deadline: datetime | None = None
    #: For approval.decided.
    decided: DecidedInfo | None = None
    #: The reminder's index (its idempotency key differs from the request's).
    reminder: int | None = None

    @property
    def idempotency_key(self) -> str:
        """One per event, the same on every retry of its delivery."""
        tail = f"/{self.reminder}" if self.reminder is not None else ""
        return f"{self.execution_id}/{self.call_id}/{self.event}{tail}"


def excerpt(code: str, line: int | None) -> CodeExcerpt:
    """The code around ``line`` (the whole code when it is short or the line unknown)."""
    lines = code.splitlines()
    if line is None or line < 1 or len(lines) <= 2 * CONTEXT_LINES + 1:
        return CodeExcerpt(first=1, lines=lines[: 2 * CONTEXT_LINES + 1], line=line)
    first = max(1, line - CONTEXT_LINES)
    return CodeExcerpt(first=first, lines=lines[first - 1 : line + CONTEXT_LINES], line=line)


def code_text(code: CodeExcerpt) -> str:
    """The excerpt with line numbers and the call's line marked ``>``."""
    return "\n".join(
        f"{'>' if code.first + i == code.line else ' '} {code.first + i:4d}  {text}"
        for i, text in enumerate(code.lines)
    )


def event_body(req: NotifyRequest, links: dict[str, str]) -> dict[str, Any]:
    """The JSON a webhook receives (and what an email says)."""
    body: dict[str, Any] = {
        "event": req.event,
        "id": req.idempotency_key,
        "execution_id": req.execution_id,
        "call_id": req.call_id,
        "tool": req.tool,
        "arguments": req.arguments,
        "summary": req.summary,
        "code": {"first_line": req.code.first, "lines": req.code.lines, "line": req.code.line},
        "asked_at": req.asked_at.isoformat() if req.asked_at else None,
        "deadline": req.deadline.isoformat() if req.deadline else None,
        "links": links,
    }
    if req.decided is not None:
        body["decision"] = req.decided.model_dump(exclude_none=True)
    return body


def headline(req: NotifyRequest) -> str:
    what = req.summary or f"{req.tool}(...)"
    if req.event == "approval.requested":
        return f"Approval needed: {what}"
    if req.event == "approval.reminder":
        return f"Reminder, approval still needed: {what}"
    if req.event == "approval.expired":
        return f"No decision in time: {what}"
    d = req.decided
    word = "answered" if d and d.answered else d.decision if d else "decided"
    by = f" by {d.by}" if d and d.by else ""
    return f"{word.capitalize()}{by}: {what}"
