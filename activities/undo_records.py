"""What the log of applied calls holds, and how a rollback is asked for and reported (issue 47).

Here, below the workflows, because the activity that reads an ended run's log returns it
(``activities/undo_log_reader.py``); ``codemode.workflows.models`` re-exports it for clients.
The log is workflow state (``workflows/undo.py``): a call of a tool that declares a
compensation enters it once its result is in the history (``applied``), or, when an attempt was
cut off and nobody knows whether it applied, as ``indeterminate``. A rollback walks it newest
first (or all at once) and leaves each entry in one of the report's words: ``compensated``,
``failed`` (with the error), ``nothing_to_do`` (its compensation found nothing to undo, or its
reconcile found it was never applied), ``indeterminate`` (unknown, and no reconcile to ask).
``cannot_undo``: applied, but its result was too large to keep for its compensation.

Everything here crosses process boundaries (status, outcome, the query a rollback of an ended
run reads) as ``CompactModel``s: a default is part of the history format.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from codemode.runtimes.types import CompactModel

from .models import UndoSpec
from .records import ApprovalRecord, ErrorInfo

UndoState = Literal["applied", "indeterminate", "compensating", "compensated", "failed", "nothing_to_do", "cannot_undo"]
#: States a rollback leaves alone: done, or nothing it could do.
SETTLED: frozenset[str] = frozenset({"compensated", "nothing_to_do", "cannot_undo"})
#: The call id a compensation waits for a person under: ``undo-3`` for call 3.
UNDO_CALL_PREFIX = "undo-"
Order = Literal["reverse", "parallel"]


def undo_call_id(call_id: str) -> str:
    return UNDO_CALL_PREFIX + call_id


class UndoEntry(CompactModel):
    """One applied call of a tool that can be undone, and what a rollback did with it."""

    call_id: str
    tool: str
    summary: str = ""
    #: The arguments it ran with (a person's edit included).
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    undo: UndoSpec
    state: UndoState = "applied"
    #: Its result, for its compensation: the value when small, else its JSON text.
    result: Any = None
    result_json: str | None = None
    result_size: int = 0
    #: Why its outcome is unknown (indeterminate), or why it cannot be undone.
    why: str | None = None
    #: What its reconcile found: ``applied`` or ``not_applied``.
    reconciled: Literal["applied", "not_applied"] | None = None
    #: The compensation's (or the reconcile's) final error, and its attempts.
    error: ErrorInfo | None = None
    attempts: int = 0
    #: The decision on the compensation, when it asks a person.
    approval: ApprovalRecord | None = None


class RollbackInfo(CompactModel):
    """Who asked for the rollback, why, and how it went."""

    #: ``deny`` (deny and roll back), ``request`` (``codemode rollback``, a door's rollback),
    #: ``on_failure`` (the request's ``on_failure="compensate"``).
    trigger: Literal["deny", "request", "on_failure"]
    by: str | None = None
    reason: str | None = None
    door: str | None = None
    order: Order = "reverse"
    #: The call whose denial rolled the run back.
    call_id: str | None = None
    #: The rollback is over (every entry settled as far as it could be).
    finished: bool = False


class UndoLog(CompactModel):
    """The log of applied calls (oldest first) and the rollback, if one ran: what ``status``,
    the outcome, ``history`` and a rollback after the run ended read."""

    entries: list[UndoEntry] = Field(default_factory=list)
    rollback: RollbackInfo | None = None
    #: A rollback execution (``rollback:ID``): the execution whose calls it undoes.
    of_execution: str | None = None

    def count(self, state: str) -> int:
        return sum(1 for e in self.entries if e.state == state)


class RollbackRequest(BaseModel):
    """Ask a run to roll back (the execution's ``rollback`` Update, or a rollback execution
    for a run that has ended): who asks, why, and in which order."""

    by: str = ""
    reason: str | None = None
    door: str | None = None
    order: Order = "reverse"


class RollbackOf(CompactModel):
    """A rollback execution's request (``CodeExecutionRequest.rollback_of``): the execution whose
    log it reads (by a query the server answers from its history), and an earlier rollback's run
    whose log says what that one already compensated."""

    execution_id: str
    previous_run: str | None = None
    request: RollbackRequest = Field(default_factory=RollbackRequest)


class ReadUndoLog(CompactModel):
    """What the rollback of an ended run reads: that run's log, and an earlier rollback's."""

    execution_id: str
    #: ``rollback:ID``'s earlier run (what it compensated stays compensated).
    rollback_id: str | None = None
    previous_run: str | None = None
