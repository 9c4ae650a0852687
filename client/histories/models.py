"""What ``codemode history`` shows of one execution: the audit's models (``client/histories/audit.py``
folds a history into them). Plain data: every call with its arguments, attempts, result and
approval, every sandbox step, every event in order, and the outcome."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from codemode.client.histories.decisions import ApprovalAudit
from codemode.workflows.models import (
    CODE_APPROVAL_ID,
    CallStatus,
    ErrorInfo,
    IgnoredSignal,
    PendingApproval,
    SandboxUsage,
    call_order,
)


class CallAudit(BaseModel):
    call_id: str
    tool: str
    summary: str = ""
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    line: int | None = None
    requires_approval: bool = False
    #: The arguments by parameter name (kept for calls that wait for a person).
    arguments: dict[str, Any] | None = None
    status: CallStatus = "pending"
    result: Any = None
    error: ErrorInfo | None = None
    attempts: int = 0
    #: The failure of the attempt before the last one, when the tool was retried.
    retried_after: ErrorInfo | None = None
    approval: ApprovalAudit | None = None
    requested_at: datetime | None = None
    scheduled_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def duration_ms(self) -> float | None:
        if self.scheduled_at and self.finished_at:
            return (self.finished_at - self.scheduled_at).total_seconds() * 1000
        return None


class StepAudit(BaseModel):
    name: str
    local: bool
    at: datetime
    attempt: int = 1
    kind: str = ""
    via: str = ""
    #: Why the step rebuilt the run by replay instead of restoring (checkpoint missing...).
    fallback: str | None = None
    error: ErrorInfo | None = None
    #: The tool whose activity ran this step right after its call (issue 11), if one did.
    after: str | None = None
    #: The step saved no checkpoint: its worker kept the run live (deferred checkpoints).
    deferred: bool = False
    #: The step cut the sandbox's network for good (``network="ratchet"``), and why.
    network_cut: str | None = None


class AuditEvent(BaseModel):
    """One line of the timeline, in history order."""

    at: datetime
    kind: Literal["started", "step", "requested", "approval", "call", "completed", "failed", "continued"]
    call_id: str | None = None
    text: str


class ExecutionAudit(BaseModel):
    execution_id: str
    run_id: str = ""
    #: Every run of the execution, first to latest (more than one after continue-as-new).
    runs: list[str] = Field(default_factory=list)
    #: Temporal's view: running, completed, failed, terminated, canceled, timed_out.
    status: str = "running"
    runtime: str = ""
    code: str = ""
    started_at: datetime | None = None
    closed_at: datetime | None = None
    started_by: str = ""
    success: bool | None = None
    output: Any = None
    stdout: str = ""
    error: ErrorInfo | None = None
    require_code_approval: bool = False
    code_approval: ApprovalAudit | None = None
    #: Decisions that could not be applied (unknown call, malformed input), with why.
    ignored_signals: list[IgnoredSignal] = Field(default_factory=list)
    steps: list[StepAudit] = Field(default_factory=list)
    calls: list[CallAudit] = Field(default_factory=list)
    events: list[AuditEvent] = Field(default_factory=list)
    #: What its sandboxes cost (``ExecutionOutcome.usage``), once it completed.
    usage: dict[str, SandboxUsage] = Field(default_factory=dict)

    @property
    def duration_ms(self) -> float | None:
        if self.started_at and self.closed_at:
            return (self.closed_at - self.started_at).total_seconds() * 1000
        return None

    def pending_approvals(self) -> list[PendingApproval]:
        """Calls waiting for a decision, as far as the history shows (no worker needed)."""
        if self.status != "running":
            return []
        pending = [
            PendingApproval(call_id=c.call_id, tool=c.tool, args=c.args, kwargs=c.kwargs, summary=c.summary)
            for c in sorted(self.calls, key=lambda c: call_order(c.call_id))
            if c.status == "awaiting_approval"
        ]
        if self.require_code_approval and self.code_approval is None and not self.steps:
            pending.insert(
                0, PendingApproval(call_id=CODE_APPROVAL_ID, tool="<code>", args=[self.code], summary="run this code")
            )
        return pending
