"""What one run of an execution hands the next when it continues as new.

A long execution (thousands of tool calls, or calls with large inline results) would pass
the server's history limits (51,200 events, 50 MB), so it rolls over to a new run of the
same workflow id at the SDK's suggestion. The new run starts from a ``Cursor`` (the step
being worked on: its checkpoint or live session, the calls not answered yet and the answers
so far) plus what the execution has accumulated: call records, the journal, stdout. The
whole ``Continuation`` is one payload; when it is large the data converter's external
storage puts it in the object store and the new run's history holds a reference.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from codemode.activities.models import CallRequest, CheckpointRef, SegmentRef, StepResult
from codemode.activities.undo_records import UndoLog
from codemode.activities.records import SnippetUse
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.types import Determinism
from codemode.workflows.models import ApprovalRecord, IgnoredSignal, ToolCallRecord
from codemode.workflows.usage import SandboxUsage


class Cursor(BaseModel):
    """Where a run stands inside one step: the step, its calls not answered yet, and the
    answers collected so far (a large gathered batch runs in windows, and a run may roll
    over between windows)."""

    step: StepResult
    remaining: list[CallRequest] = Field(default_factory=list)
    answers: list[JournalEntry] = Field(default_factory=list)
    #: The checkpoint before ``step.checkpoint``; the next resume deletes it.
    superseded: CheckpointRef | None = None


def can_fuse(cursor: Cursor, local: bool) -> bool:
    """Whether the next call's tool activity can run the step after it: a step waiting
    for exactly one call, of a snapshot runtime (any worker can continue it) or of a live
    process a worker keeps (that worker runs it; elsewhere the activity leaves it to the
    workflow's own step, on that worker's queue, which is what a run recorded before
    issue 28 did, so its history replays). Decided from recorded data only, so no patch
    marker (and no search-attribute upsert) per run."""
    step = cursor.step
    if len(cursor.remaining) != 1 or cursor.answers:
        return False
    if step.session_id:
        return step.session_queue is not None
    return local and (step.checkpoint is not None or step.live is not None)


class Continuation(BaseModel):
    started_at: datetime
    #: Run ids of the runs before this one, oldest first (the audit follows the chain).
    runs: list[str] = Field(default_factory=list)
    #: The journal and call records of the runs before, stored once each (one segment per
    #: rollover): the carry stays small however long the execution, and nothing is stored twice.
    segments: list[SegmentRef] = Field(default_factory=list)
    #: Bytes of results kept whole in the call records so far (the records' budget).
    record_bytes: int = 0
    #: Call records and journal entries not in a segment yet.
    calls: list[ToolCallRecord] = Field(default_factory=list)
    journal: list[JournalEntry] = Field(default_factory=list)
    stdout: str = ""
    code_approval: ApprovalRecord | None = None
    ignored_signals: list[IgnoredSignal] = Field(default_factory=list)
    #: The approvers file the run pinned (its SHA-256; generation-45): the next run keeps it.
    approvers_sha256: str | None = None
    determinism: Determinism | None = None
    cursor: Cursor
    #: A deferred step (``cursor.step.live``): ``journal`` starts at its checkpoint; the
    #: stdout length there and the JSON bytes of those entries (see CodeExecutionWorkflow).
    base_stdout: int = 0
    tail_bytes: int = 0
    #: The usage of the runs before (``workflows/usage.py``).
    usage: SandboxUsage | None = None
    #: The log of applied calls (issue 47): small (ids, compensations, results up to 64 KB).
    undo: UndoLog | None = None
    #: The saved snippets the first step loaded, and their prelude (``workflows/snippet_state.py``).
    snippets: list[SnippetUse] = Field(default_factory=list)
    prelude: CheckpointRef | None = None
