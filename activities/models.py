"""Inputs and outputs of the sandbox-step and tool activities (the workflow's contract with them)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

from runtimes.replay import JournalEntry
from runtimes.types import ExecutionLimits, ExecutionResult
from workflows.models import ErrorInfo


def _from_b64(value: Any) -> Any:
    return base64.b64decode(value) if isinstance(value, str) else value


#: Raw bytes in Python, base64 text in JSON (checkpoints travel through the data converter).
Blob = Annotated[
    bytes,
    BeforeValidator(_from_b64),
    PlainSerializer(lambda b: base64.b64encode(b).decode("ascii"), return_type=str, when_used="json"),
]


#: Failure type of a resume whose checkpoint the worker cannot load (a checkpoint from
#: another Monty version): the workflow then rebuilds the run by journal replay.
CHECKPOINT_REFUSED = "CheckpointRefused"

#: How a step got its sandbox: started, restored (checkpoint), live (kept), replayed (journal).
Via = Literal["started", "restored", "live", "replayed"]


class CallRequest(BaseModel):
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
    non_retryable: list[str] = Field(default_factory=list)


class StartInput(BaseModel):
    execution_id: str
    runtime: str
    code: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] | None = None
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)


class ResumeInput(BaseModel):
    execution_id: str
    runtime: str
    #: Tier 1: the snapshot to restore.
    checkpoint: Blob | None = None
    #: A live sandbox held by a worker (tier 3 with keep-alive): tried first.
    session_id: str | None = None
    #: This step's answers: the outcomes of the calls the previous step returned.
    answers: list[JournalEntry] = Field(default_factory=list)
    #: The execution's tool allow-list (None = every registered tool).
    tools: list[str] | None = None
    #: For journal replay when neither the session nor the checkpoint can be used: every
    #: answered call so far, this step's answers included.
    start: StartInput | None = None
    journal: list[JournalEntry] = Field(default_factory=list)
    #: Bytes of stdout already reported, skipped when a replay prints them again.
    stdout_offset: int = 0


class StepResult(BaseModel):
    """What one sandbox step produced."""

    kind: Literal["calls", "result", "error"]
    calls: list[CallRequest] = Field(default_factory=list)
    #: Calls answered inside the step without running a tool (invalid arguments,
    #: unknown tool): recorded in the journal and the audit, never run.
    rejected: list[JournalEntry] = Field(default_factory=list)
    checkpoint: Blob | None = None
    session_id: str | None = None
    #: The task queue of the worker holding the live session (steps go there first).
    session_queue: str | None = None
    result: ExecutionResult | None = None
    error: ErrorInfo | None = None
    stdout: str = ""
    stdout_truncated: bool = False
    #: How this step got its sandbox: started, restored (checkpoint), live (session), replayed.
    via: Via = "started"


class ToolInput(BaseModel):
    execution_id: str
    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class ToolOutput(BaseModel):
    value: Any = None
    attempt: int = 1
