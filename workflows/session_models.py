"""What crosses the boundary of a session's workflow: its start, the cells sent to it, its
status, and what one run hands the next when it continues as new."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from codemode.activities.models import CellEffect, CellRecipe, CheckpointRef, SegmentRef
from codemode.activities.records import SESSION_WORKFLOW_TYPE, ErrorInfo
from codemode.runtimes.types import Determinism
from codemode.workflows.models import SESSION_NAME, CodeExecutionRequest, ExecutionOutcome, check_session_name

__all__ = ("SESSION_WORKFLOW_TYPE",)  # (defined beside the execution's, for the retention sweep)
#: A session with no cell for this long closes, and its state is deleted.
DEFAULT_IDLE_TIMEOUT = timedelta(hours=24)
#: Cells a session holds waiting at most (a client sending more is refused).
MAX_QUEUED = 100
#: Finished cells the status lists (the rest: ``codemode session show`` reads each cell's
#: execution, which keeps its whole audit).
RECENT_CELLS = 20

SESSION_PREFIX = "session:"
#: The signal by which a workflow sends a cell (workflows cannot send Updates).
ENQUEUE_SIGNAL = "enqueue"
#: The signal by which a session answers a workflow that sent a cell (``CellReply``).
CELL_REPLY_SIGNAL = "codemode_cell_reply"
#: Request ids a session remembers, so a cell sent twice runs once.
REMEMBERED_REQUESTS = 256


def session_workflow_id(name: str) -> str:
    """The workflow id of session ``name`` (``session:NAME``)."""
    return SESSION_PREFIX + check_session_name(name)


#: The longest name ``session_name_for`` makes (a replacement's ``.N`` suffix must still fit).
DERIVED_NAME_CHARS = 56
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


def session_name_for(*parts: str) -> str:
    """A valid session name for what ``parts`` identify (a conversation, an agent's workflow):
    the parts joined by ``-`` when that is a valid name of at most 56 characters, else its
    valid characters cut short and a digest of the parts (distinct parts, distinct names)."""
    joined = "-".join(parts)
    if len(joined) <= DERIVED_NAME_CHARS and SESSION_NAME.fullmatch(joined):
        return joined
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    readable = _NOT_IN_NAME.sub("_", joined).strip("_.-")[: DERIVED_NAME_CHARS - len(digest) - 1].rstrip("_.-")
    return f"{readable}-{digest}" if readable else digest


def replacement_name(name: str, generation: int) -> str:
    """The name of the ``generation``-th session standing for ``name`` (``name``, ``name.2``,
    ...): a closed session's name is never reused, so its successor takes the next one."""
    return name if generation <= 1 else f"{name}.{generation}"


def cell_execution_id(name: str, index: int) -> str:
    """The execution id of a session's cell ``index`` (``session:NAME:3``)."""
    return f"{session_workflow_id(name)}:{index}"


def parse_cell_execution_id(execution_id: str) -> tuple[str, int] | None:
    """``(session name, cell index)`` of a cell's execution id, else None."""
    if not execution_id.startswith(SESSION_PREFIX):
        return None
    name, sep, index = execution_id[len(SESSION_PREFIX) :].rpartition(":")
    if not sep or not index.isdigit():
        return None
    return name, int(index)


class SessionStart(BaseModel):
    """How a session is created (by its first cell)."""

    name: str
    runtime: str = "monty"
    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        return check_session_name(name)


class CellSubmission(BaseModel):
    """A cell sent to a session (the Update ``submit``)."""

    request: CodeExecutionRequest


class CellTicket(BaseModel):
    """A cell accepted by its session."""

    session: str
    index: int
    execution_id: str
    #: Cells before it that have not finished yet (0: it runs now; else it waits its turn, and
    #: the session's status says behind what).
    ahead: int = 0


#: queued (waits its turn), starting (its execution is being started), running, then how it ended.
#: awaiting_approval: running, and parked on a person's decision; the session itself never says
#: it (it only knows the cell runs): clients that ask the cell do (``describe_session(approvals=True)``).
CellState = Literal["queued", "starting", "running", "awaiting_approval", "completed", "failed", "cancelled", "dropped"]


class CellRecord(BaseModel):
    index: int
    execution_id: str
    state: CellState = "queued"
    #: The first line of its code.
    summary: str = ""
    restart: bool = False
    effect: CellEffect | None = None
    error: ErrorInfo | None = None
    #: Queued: what it waits for.
    waiting_for: str | None = None


class QueuedCell(BaseModel):
    record: CellRecord
    request: CodeExecutionRequest
    started: bool = False
    #: Sent by a workflow (``WorkflowCell``): whom to answer when it ends, and under which id.
    reply_to: str | None = None
    request_id: str | None = None


class WorkflowCell(BaseModel):
    """A cell sent by a workflow (the signal ``enqueue``): the session answers ``reply_to``
    with the signal ``codemode_cell_reply`` (a ``CellReply``) when the cell ends, or at once
    when it refuses it. ``request_id`` is the sender's deterministic id for this cell: sent
    twice, it still runs once."""

    request: CodeExecutionRequest
    request_id: str
    reply_to: str


class CellReply(BaseModel):
    """A session's answer to a workflow that sent a cell."""

    request_id: str
    session: str
    #: The cell's number and execution id (none when refused).
    index: int | None = None
    execution_id: str | None = None
    #: How it ended (``refused``: never queued, see ``error``).
    state: CellState | Literal["refused"]
    #: The cell's outcome when its execution ended (code errors in-band, like any execution).
    outcome: ExecutionOutcome | None = None
    #: Why it was refused, or why it has no outcome (its execution failed or was cancelled,
    #: or the session closed before it ran). ``type`` is ``SessionClosed`` when the sender
    #: should start a new session.
    error: ErrorInfo | None = None


SessionState = Literal["open", "closing", "closed"]


class SessionStatus(BaseModel):
    """The ``describe`` query."""

    name: str
    runtime: str
    state: SessionState
    #: Cells submitted so far (numbered 1..cells).
    cells: int = 0
    running: CellRecord | None = None
    queued: list[CellRecord] = Field(default_factory=list)
    recent: list[CellRecord] = Field(default_factory=list)
    #: The globals after the last cell: name -> type name.
    variables: dict[str, str] = Field(default_factory=dict)
    #: Where the session is kept between cells: "state" (a dump in the object store), "live"
    #: (a worker's process), or "replay" (rebuilt from its cells when next needed), "empty".
    kept_as: str = "empty"
    state_bytes: int = 0
    restarts: int = 0
    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT
    last_active: datetime | None = None
    closes_at: datetime | None = None
    closed_reason: str | None = None
    runs: int = 1


class SessionCarry(BaseModel):
    """What one run of a session hands the next when it continues as new."""

    count: int
    runs: list[str] = Field(default_factory=list)
    determinism: Determinism
    restarts: int = 0
    state: CheckpointRef | None = None
    #: The state's sandbox keeps running while idle (``CellEnd.release_after``, ``running_why``);
    #: why the next cell replays, after the session released it.
    release_after: float | None = None
    running_why: str | None = None
    replay_reason: str | None = None
    live: str | None = None
    live_queue: str | None = None
    recipe_segments: list[SegmentRef] = Field(default_factory=list)
    recipe: list[CellRecipe] = Field(default_factory=list)
    variables: dict[str, str] = Field(default_factory=dict)
    queue: list[QueuedCell] = Field(default_factory=list)
    recent: list[CellRecord] = Field(default_factory=list)
    last_active: datetime
    #: Request ids of cells sent by workflows -> the cell's number (the latest ones).
    requests: dict[str, int] = Field(default_factory=dict)


class SessionSummary(BaseModel):
    """A closed session's result."""

    name: str
    cells: int
    closed_reason: str
