"""Inputs and outputs of the sandbox-step and tool activities (the workflow's contract with them).

These records are written into the workflow history once per step or tool call, so they are
``CompactModel``s (defaults left out) and never carry a checkpoint itself: a checkpoint lives
in the object store and the history holds its ``CheckpointRef``.
"""

from __future__ import annotations

import json

import os
from typing import Any, Literal

from pydantic import Field

from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.types import (
    CompactModel,
    Determinism,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    SandboxOptions,
)

from .records import ErrorInfo, ToolCallRecord

#: Failure type of a resume whose checkpoint cannot be used (missing from the store,
#: altered, written by another runtime version): the workflow rebuilds by journal replay.
CHECKPOINT_REFUSED = "CheckpointRefused"
#: Failure type of a resume sent to a worker that no longer holds the live sandbox.
SESSION_GONE = "SessionGone"

#: How a step got its sandbox: started, restored (checkpoint), live (kept), replayed (journal).
Via = Literal["started", "restored", "live", "replayed"]

#: The largest single value we let into the workflow: one tool result, the code's output,
#: an input, one call's arguments. Past it a value becomes a typed error, never a payload
#: the server or the object store would refuse (and the run retry forever).
MAX_VALUE_BYTES = int(os.environ.get("CODEMODE_MAX_VALUE_BYTES") or 64 * 1024 * 1024)
#: A tool result up to this size is kept whole in the call's audit record; a larger one
#: only in the journal (which the code's replay needs) and as a preview in the record.
RECORD_RESULT_BYTES = 16 * 1024
#: Longest error message or traceback we write into a failure (failures are not payloads:
#: external storage does not offload them).
MAX_ERROR_CHARS = 8 * 1024


def human_bytes(n: float) -> str:
    """``80 MB``, ``1.5 KB``: sizes in messages meant for people and models."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" or n >= 10 else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.0f} GB"


def clip(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A message cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters]"


class CheckpointRef(CompactModel):
    """A checkpoint in the object store: its SHA-256 (which is also its key) and size. The
    restoring step verifies the hash before anything is loaded into a sandbox."""

    sha256: str
    size: int


class SegmentRef(CheckpointRef):
    """A stored segment of an execution's state (its journal and call records up to a
    rollover): each run of a long execution adds one, so nothing is stored twice."""

    calls: int = 0


class StateSegment(CompactModel):
    journal: list[JournalEntry] = Field(default_factory=list)
    calls: list[ToolCallRecord] = Field(default_factory=list)


class SaveStateInput(CompactModel):
    execution_id: str
    first_run_id: str = ""
    segment: StateSegment


class LoadStateInput(CompactModel):
    execution_id: str
    first_run_id: str = ""
    segments: list[SegmentRef] = Field(default_factory=list)


# -- sessions (cells that share a namespace; workflows/session_workflow.py) ------------------------------


class SessionScope(CompactModel):
    """Where a session keeps its state in the object store: under its workflow (every run of
    it), so the state outlives each cell's execution."""

    session_id: str
    first_run_id: str = ""


class CellRecipe(CompactModel):
    """What rebuilding the session needs of one earlier cell whose effects stay: its code,
    inputs and tools, its recorded tool results, and whether its code raised."""

    code: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] | None = None
    #: Its journal (the tool results) in the store; None when it made no calls.
    journal: SegmentRef | None = None
    raised: bool = False


class SessionRecipe(CompactModel):
    """Earlier cells' recipes, stored as one segment when a session continues as new."""

    cells: list[CellRecipe] = Field(default_factory=list)


class CellStart(CompactModel):
    """A cell of a session: where the session's state is, and how to rebuild it."""

    scope: SessionScope
    #: The cell's number in the session (1, 2, ...).
    index: int
    #: The session's seed and clock (one per session, renewed by a restart).
    determinism: Determinism
    #: The session after its last cell, in the store (monty: the VM's session state; e2b:
    #: the paused sandbox it names).
    state: CheckpointRef | None = None
    #: A live session held by a worker (python), tried first on that worker's queue.
    live: str | None = None
    live_queue: str | None = None
    #: The cells to replay when neither is usable (since the last restart, oldest first):
    #: stored segments, then the rest.
    recipe_segments: list[SegmentRef] = Field(default_factory=list)
    recipe: list[CellRecipe] = Field(default_factory=list)
    #: Why the session holds no state to start from (its idle sandbox was released): the
    #: history's reason for the replay.
    replay_reason: str | None = None

    @property
    def has_recipe(self) -> bool:
        return bool(self.recipe or self.recipe_segments)


class CellRef(CompactModel):
    """What a step that may end a cell needs: the session's scope, and the state the cell
    started from (deleted once a newer one is saved)."""

    scope: SessionScope
    state: CheckpointRef | None = None


#: What a cell did to its session: its effects stay (it completed, or its code raised),
#: nothing changed (it could not start), or it was rolled back (a limit stopped it, or the
#: sandbox died: the session is as it was before the cell).
CellEffect = Literal["kept", "none", "rolled_back"]


class CellEnd(CompactModel):
    """The session after a cell: where its state is now, and the globals it holds."""

    effect: CellEffect = "kept"
    state: CheckpointRef | None = None
    live: str | None = None
    live_queue: str | None = None
    #: Name -> type name of the globals.
    variables: dict[str, str] = Field(default_factory=dict)
    #: The cell's journal, stored under the session for a later rebuild (set by the workflow).
    journal: SegmentRef | None = None
    #: The sandbox ``state`` names keeps running between cells (Modal cannot pause it, or the
    #: pause failed): seconds the session may leave it idle before it releases it (the park
    #: grace period), and why it runs. None: it costs nothing while idle.
    release_after: float | None = None
    running_why: str | None = None


class SessionRecipeInput(CompactModel):
    """Store the recipe of a session's latest cells after the stored ``segments``."""

    scope: SessionScope
    segments: list[SegmentRef] = Field(default_factory=list)
    recipe: SessionRecipe


class SessionRecipeRefs(CompactModel):
    """The stored segments of a session's recipe, oldest first (merged when they get many)."""

    segments: list[SegmentRef] = Field(default_factory=list)


class SessionReleaseInput(CompactModel):
    """Let go of a session's state: on a restart (the state it had) or when it closes
    (everything it stored)."""

    scope: SessionScope
    runtime: str
    state: CheckpointRef | None = None
    live: str | None = None
    #: Delete everything stored under the session (it is closing).
    everything: bool = False


class CallRequest(CompactModel):
    """A tool call the code made, validated, with the tool's policy attached so the
    (deterministic) workflow can schedule it without knowing the registry."""

    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    summary: str = ""
    line: int | None = None
    requires_approval: bool = False
    max_attempts: int = 3
    timeout_seconds: float = 60.0
    #: The tool returns private data (``@tool(private_data=True)``): the ratchet cuts the
    #: sandbox's network before its result is answered.
    private_data: bool = False
    #: Set for a call that waits for a person only: its arguments by parameter name, and the
    #: JSON schemas an edit of them and an answer instead of the tool are checked against.
    arguments: dict[str, Any] | None = None
    parameters_schema: dict[str, Any] | None = None
    returns_schema: dict[str, Any] | None = None
    #: Why the call waits (a rule or predicate that decided so), for the person.
    approval_reason: str | None = None

    def function_call(self) -> FunctionCall:
        """The call as the code made it (what its journal entry records)."""
        return FunctionCall(
            call_id=self.call_id, function_name=self.tool, args=self.args, kwargs=self.kwargs, line=self.line
        )


class StartInput(CompactModel):
    execution_id: str
    runtime: str
    code: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] | None = None
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)
    #: The first run's id: checkpoints are kept under it, so a later execution that reuses
    #: the execution id never touches them.
    first_run_id: str = ""
    #: The seed and clock the code sees, fixed by the workflow, so a journal replay makes
    #: the same calls (``codemode.runtimes.types.Determinism``).
    determinism: Determinism | None = None
    #: JSON bytes the first step may leave unsaved (see ``NextStep.defer_bytes``; 0: save).
    defer_bytes: int = 0
    #: Mounts, network and packages (None: the defaults); a replay starts with the same.
    options: SandboxOptions | None = None
    #: A cell of a session: run the code in the session's namespace (``CellStart``).
    cell: CellStart | None = None


class ResumeInput(CompactModel):
    execution_id: str
    runtime: str
    first_run_id: str = ""
    #: The checkpoint to continue from (tiers 1 and 2).
    checkpoint: CheckpointRef | None = None
    #: The checkpoint before it: recorded history has moved past it, so the step deletes it
    #: (a run keeps at most two checkpoints in the store, whatever its length).
    superseded: CheckpointRef | None = None
    #: A live sandbox held by a worker (tier 3 with keep-alive): tried first.
    session_id: str | None = None
    #: This step's answers: the outcomes of the calls the previous step returned.
    answers: list[JournalEntry] = Field(default_factory=list)
    #: The execution's tool allow-list (None = every registered tool).
    tools: list[str] | None = None
    #: Only when the step must rebuild the run by journal replay (no live session, no
    #: usable checkpoint): the start and every answered call so far, this step's included.
    start: StartInput | None = None
    #: The journal: its stored segments (earlier runs of a long execution), then the rest.
    journal_segments: list[SegmentRef] = Field(default_factory=list)
    journal: list[JournalEntry] = Field(default_factory=list)
    #: Why the workflow sends the journal (for the audit): the previous attempt's refusal.
    replay_reason: str | None = None
    #: Bytes of stdout already reported, skipped when a replay prints them again.
    stdout_offset: int = 0
    #: A live run a worker kept without saving a checkpoint (``StepResult.live``): tried
    #: first. Its state is ``checkpoint`` (or the start, when None) plus ``tail_entries``
    #: journal entries and then ``answers``.
    live: str | None = None
    #: How many journal entries since ``checkpoint`` the live run has absorbed, and, for a
    #: step that may have to rebuild it, those entries (a fused step gets the count alone and
    #: leaves a rebuild to the workflow's own step).
    tail_entries: int = 0
    tail: list[JournalEntry] = Field(default_factory=list)
    #: Stdout the code printed since ``checkpoint`` (reported already; a rebuild prints it again).
    base_stdout: int = 0
    #: A cell of a session: where a step that ends it saves the session.
    cell: CellRef | None = None


class StepResult(CompactModel):
    """What one sandbox step produced."""

    kind: Literal["calls", "result", "error"]
    calls: list[CallRequest] = Field(default_factory=list)
    #: Calls answered inside the step without running a tool (invalid arguments,
    #: unknown tool): recorded in the journal and the audit, never run.
    rejected: list[JournalEntry] = Field(default_factory=list)
    #: Calls of host functions built into every execution that the step answered itself
    #: (``save_artifact``: the result is the artifact's reference): journaled like a tool's.
    served: list[JournalEntry] = Field(default_factory=list)
    checkpoint: CheckpointRef | None = None
    session_id: str | None = None
    #: The task queue of the worker holding the live session (steps go there first).
    session_queue: str | None = None
    result: ExecutionResult | None = None
    error: ErrorInfo | None = None
    stdout: str = ""
    stdout_truncated: bool = False
    #: How this step got its sandbox: started, restored (checkpoint), live (session), replayed.
    #: (Default "live", the common case of a resume, so the history does not repeat it.)
    via: Via = "live"
    #: Why a step that should have restored replayed instead (checkpoint missing, altered...).
    fallback: str | None = None
    #: The checkpoint names a sandbox that costs compute while it waits (a cloud session):
    #: the workflow suspends it when the run parks on an approval.
    holds_compute: bool = False
    #: The code ended and the step already freed what it consumed (a snapshot runtime's last
    #: checkpoint): the workflow has nothing left to release.
    released: bool = False
    #: The step saved no checkpoint (issue 11, deferred checkpoints): the worker keeps the run
    #: live under this key, and the durable state is the checkpoint before (or the start)
    #: plus the journal entries since, which the workflow holds. ``deferred`` is the JSON
    #: bytes this step added to that tail (0: not deferred).
    live: str | None = None
    deferred: int = 0
    #: The cell ended (a cell of a session): the session after it.
    cell: CellEnd | None = None
    #: The step cut the sandbox's network for good before answering a private tool's result
    #: (``network="ratchet"``): why, for the audit.
    network_cut: str | None = None
    #: The first step's ``PYTHONHASHSEED`` when the runtime chose it (a warm interpreter,
    #: ``runtimes/warm_pool.py``): the workflow keeps it in the execution's determinism.
    hash_seed: int | None = None


class NextStep(CompactModel):
    """What a tool activity needs to run the sandbox step after its call (issue 11): the
    call was the only one its step was waiting for, so the same activity answers it and
    runs the code on to its next calls, and the workflow needs no resume step of its own."""

    runtime: str
    first_run_id: str = ""
    #: None only with ``live``: a run whose start deferred its checkpoint.
    checkpoint: CheckpointRef | None = None
    superseded: CheckpointRef | None = None
    tools: list[str] | None = None
    stdout_offset: int = 0
    #: Seconds the step may take after the tool returned; past them the activity returns the
    #: tool's result alone and the workflow runs the step. The activity's start-to-close
    #: timeout is the tool's own plus this (the tool keeps its own timeout inside).
    step_timeout: float = 10.0
    #: The live run to continue (``StepResult.live``) and the journal entries it holds beyond
    #: ``checkpoint``: a worker without it leaves the step to the workflow, which has them.
    live: str | None = None
    tail_entries: int = 0
    #: JSON bytes the step may add to the unsaved tail instead of saving a checkpoint (0: save).
    defer_bytes: int = 0
    cell: CellRef | None = None
    #: A live process a worker keeps (``StepResult.session_id``, a runtime without
    #: checkpoints): only that worker runs the step; any other leaves it to the workflow,
    #: whose resume step goes to that worker's queue (issue 28).
    session_id: str | None = None

    def resume_input(self, execution_id: str, answer: JournalEntry) -> ResumeInput:
        return ResumeInput(
            execution_id=execution_id,
            runtime=self.runtime,
            first_run_id=self.first_run_id,
            checkpoint=self.checkpoint,
            superseded=self.superseded,
            answers=[answer],
            tools=self.tools,
            stdout_offset=self.stdout_offset,
            live=self.live,
            tail_entries=self.tail_entries,
            cell=self.cell,
            session_id=self.session_id,
        )


class ToolInput(CompactModel):
    """A tool call as its activity sees it (the tool is the activity type, the execution is
    the workflow id)."""

    call_id: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    #: Run the sandbox step after the call, in this activity (see ``NextStep``).
    then: NextStep | None = None
    #: The tool's own timeout, kept inside the activity when ``then`` lengthens the activity's.
    timeout_seconds: float | None = None


class ToolOutput(CompactModel):
    value: Any = None
    attempt: int = 1
    #: Size of the value as JSON, so the workflow can decide what to keep without measuring.
    size: int = 0
    #: A value over ``RECORD_RESULT_BYTES`` comes as its JSON text instead of ``value``, with a
    #: ``preview`` for the call's record: the workflow passes it on to the code unparsed. Parsing
    #: megabytes into objects (and back) in a workflow task took seconds on a loaded worker, which
    #: the SDK fails as a potential deadlock (issue 43).
    value_json: str | None = None
    preview: str | None = None

    def result(self) -> Any:
        """The value, parsed when it came as JSON text (outside the workflow: the audit, a client)."""
        return json.loads(self.value_json) if self.value_json is not None else self.value
    #: The sandbox step run after the call (``ToolInput.then``), or None: then ``unfused``
    #: says why, and the workflow runs the step itself. The tool never runs again for it.
    step: StepResult | None = None
    unfused: str | None = None


class ParkResult(CompactModel):
    """What a parked run's sandbox does while the run waits for a person (``sandbox_park``)."""

    #: ``paused``: its compute stopped, its processes kept (Docker, E2B); ``standby``: the
    #: provider stops it when idle, processes kept (Blaxel); ``running``: it keeps running
    #: (and billing), so it is released after ``release_after`` seconds (Modal, or a pause
    #: that failed); ``nothing``: there was nothing left to park.
    parked_as: Literal["paused", "standby", "running", "nothing"]
    why: str = ""
    release_after: float | None = None


class ReleaseInput(CompactModel):
    """Let go of an execution's sandbox: pause it while the run waits for a person, or free
    it (and its last checkpoint) when the execution is over."""

    execution_id: str
    runtime: str
    first_run_id: str = ""
    checkpoint: CheckpointRef | None = None
    #: The checkpoint before it, if the run ended before a step could delete it.
    superseded: CheckpointRef | None = None
    session_id: str | None = None
    #: A live run kept without a checkpoint (``StepResult.live``), closed if still held.
    live: str | None = None
    mode: Literal["suspend", "discard"] = "discard"
    #: A cell of a session: its checkpoint names the session's sandbox, which outlives the
    #: cell (the session decides its fate): discard deletes the checkpoint, frees nothing.
    cell: bool = False
