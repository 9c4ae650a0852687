"""What ``execute`` and ``result`` answer: one ``ExecutionReport`` as ``structuredContent``
(``status``, ``execution_id``, ``output``, ``stdout``, ``error``, ``pending_approvals``,
``tool_calls``) and the same in readable text, in the CLI's words and lines."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field

from codemode.client import display
from codemode.client.decision_hints import decide_command
from codemode.workflows.models import (
    ApprovalRecord,
    Artifact,
    CallStatus,
    ErrorInfo,
    ExecutionOutcome,
    PendingApproval,
    ToolCallRecord,
)

#: The CLI's state words (``running`` only when a run outlives the wait it was given;
#: ``queued`` for a session's cell still waiting for the cells before it).
Status = Literal["queued", "running", "completed", "failed", "awaiting_approval", "cancelled", "timed_out"]
#: Readable text keeps the output to this many characters (``structuredContent`` has all of it).
TEXT_OUTPUT_MAX = 20_000


class CallReport(BaseModel):
    call_id: str
    tool: str
    #: ``get_weather(city='Paris')``
    summary: str = ""
    status: CallStatus
    result: Any = None
    error: ErrorInfo | None = None
    attempts: int = 0
    approval: ApprovalRecord | None = None

    @classmethod
    def of(cls, record: ToolCallRecord) -> CallReport:
        result = record.result if record.result is not None or not record.result_preview else record.result_preview
        return cls(
            call_id=record.call_id,
            tool=record.tool,
            summary=record.summary,
            status=record.status,
            result=result,
            error=record.error,
            attempts=record.attempts,
            approval=record.approval,
        )


class PendingReport(BaseModel):
    """A call waiting for a person, and the commands that decide it."""

    call_id: str
    tool: str
    summary: str = ""
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    approve: str
    deny: str


class ExecutionReport(BaseModel):
    status: Status
    execution_id: str
    output: Any = None
    stdout: str = ""
    error: ErrorInfo | None = None
    pending_approvals: list[PendingReport] = Field(default_factory=list)
    tool_calls: list[CallReport] = Field(default_factory=list)
    #: Files the code handed back; their contents follow the text (``artifacts.py``).
    artifacts: list[Artifact] = Field(default_factory=list)
    #: What to set up before this door can decide (e.g. a signing key: ``client/signing.py``).
    note: str | None = None


def completed(outcome: ExecutionOutcome) -> ExecutionReport:
    return ExecutionReport(
        status="completed" if outcome.success else "failed",
        execution_id=outcome.execution_id,
        output=outcome.output,
        stdout=outcome.stdout,
        error=outcome.error,
        tool_calls=[CallReport.of(c) for c in outcome.tool_calls],
        artifacts=outcome.artifacts,
    )


def pending(
    execution_id: str,
    waiting: list[PendingApproval],
    calls: list[ToolCallRecord],
    stdout: str,
    *,
    status: Status = "awaiting_approval",
    address_flag: str = "",
) -> ExecutionReport:
    """A run still going: parked on approvals (``awaiting_approval``), or still ``running``."""
    return ExecutionReport(
        status=status,
        execution_id=execution_id,
        stdout=stdout,
        pending_approvals=[
            PendingReport(
                call_id=p.call_id,
                tool=p.tool,
                summary=p.summary,
                args=p.args,
                kwargs=p.kwargs,
                approve=decide_command("approve", execution_id, p.call_id, signed=p.signed, flags=address_flag),
                deny=decide_command("deny", execution_id, p.call_id, signed=p.signed, flags=address_flag),
            )
            for p in waiting
        ],
        tool_calls=[CallReport.of(c) for c in calls],
    )


def closed(execution_id: str, status: Status, why: str) -> ExecutionReport:
    """A run Temporal closed without an outcome of ours (cancelled, timed out, terminated)."""
    return ExecutionReport(
        status=status, execution_id=execution_id, error=ErrorInfo(type=status, message=why, kind="sandbox")
    )


def text(report: ExecutionReport, *, ui_url: str | None = None) -> str:
    """The report as a person (or a model) reads it."""
    lines = [display.call_line(_as_record(c)) for c in report.tool_calls]
    if report.stdout:
        lines += ["stdout:", report.stdout.rstrip("\n")]
    rid = report.execution_id
    if report.status == "completed":
        lines.append(f"✓ completed · {_count(report)} · {rid}")
        lines.append("output: " + _cut(json.dumps(report.output, indent=2, ensure_ascii=False, default=str)))
        lines += _artifact_lines(report)
    elif report.status == "awaiting_approval":
        lines.append(f"⏸ {rid} is waiting for approval:")
        lines += [f"    call {p.call_id}: {p.summary or p.tool}" for p in report.pending_approvals]
        for p in report.pending_approvals:
            lines += [f"  approve: {p.approve}", f"  deny:    {p.deny}"]
        where = f" (or in the Temporal web UI at {ui_url}: Send a Signal `approve` or `deny`)" if ui_url else ""
        lines.append(f"A person decides with the commands above{where}; the run waits, holding nothing.")
        lines.append(f"Then call result(execution_id='{rid}') for the outcome.")
        if report.note:
            lines.append(f"Not asked here: {report.note}.")
    elif report.status == "queued":
        lines.append(
            f"… {rid} waits for its turn in its session; call result(execution_id='{rid}', wait_seconds=60) later."
        )
    elif report.status == "running":
        lines.append(f"… {rid} is still running; call result(execution_id='{rid}', wait_seconds=60) for the outcome.")
    else:
        err = report.error
        where = f" (line {err.line})" if err and err.line else ""
        what = f"{err.type}: {err.message}{where}" if err else report.status
        lines.append(f"✗ {report.status}: {what} · {_count(report)} · {rid}")
        if err and err.traceback:
            lines.append(err.traceback.rstrip())
    return "\n".join(lines)


def _artifact_lines(report: ExecutionReport) -> list[str]:
    if not report.artifacts:
        return []
    from codemode.activities.models import human_bytes

    lines = ["artifacts (their contents follow):"]
    for a in report.artifacts:
        lines.append(f"  {a.name} · {a.mime_type} · {human_bytes(a.size)}")
    lines.append(f"fetch one: codemode artifacts {report.execution_id} NAME -o FILE")
    return lines


def _count(report: ExecutionReport) -> str:
    n = len(report.tool_calls)
    return f"{n} tool call{'s' if n != 1 else ''}"


def _cut(text: str) -> str:
    if len(text) <= TEXT_OUTPUT_MAX:
        return text
    return text[:TEXT_OUTPUT_MAX] + f"\n… ({len(text):,} characters; the whole output is in structuredContent)"


def _as_record(c: CallReport) -> ToolCallRecord:
    return ToolCallRecord(
        call_id=c.call_id,
        tool=c.tool,
        summary=c.summary,
        status=c.status,
        result=c.result,
        error=c.error,
        attempts=c.attempts,
        approval=c.approval,
    )
