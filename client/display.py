"""Human-friendly text for the CLI: tool-call lines, outcomes, status, the audit timeline.

Pure functions from models to strings, so `run`, `result`, `status` and `history` all show
a call the same way: ``→ get_weather(city='Paris')  ✓ {"city": "Paris", ...}``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from codemode.client.decision_hints import decide_command
from codemode.workflows.models import ExecutionOutcome, ExecutionStatus, PendingApproval, ToolCallRecord

if TYPE_CHECKING:  # (the audit is read only by `history`: `status` does without it)
    from codemode.client.histories.audit import CallAudit, ExecutionAudit

FINAL_CALL_STATES = frozenset({"ok", "error", "denied", "timed_out"})


def short(value: Any, limit: int = 100) -> str:
    """Compact JSON, cut to one readable line."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def call_line(call: ToolCallRecord | CallAudit) -> str:
    """One tool call and where it stands."""
    head = f"→ {call.summary or call.tool + '(...)'}"
    attempts = f"  ({call.attempts} attempts)" if call.attempts > 1 else ""
    if call.status == "ok":
        # A large result is not in the record, only the start of it (the journal has it all).
        preview = getattr(call, "result_preview", None)
        if call.result is None and preview:
            shown = preview if len(preview) <= 100 else preview[:99] + "…"
        else:
            shown = short(call.result)
        return f"{head}  ✓ {shown}{attempts}"
    if call.status == "awaiting_approval":
        return f"{head}  ⏸ awaiting approval (call {call.call_id})"
    if call.status in ("denied", "timed_out"):
        return f"{head}  ✗ {call.error.message if call.error else call.status}"
    if call.status == "error":
        err = call.error
        return f"{head}  ✗ {err.type}: {err.message}{attempts}" if err else f"{head}  ✗ failed"
    return f"{head}  … {call.status}"


def approval_help(execution_id: str, pending: list[PendingApproval], address_flag: str = "") -> list[str]:
    """What is waiting and the exact commands that decide it."""
    lines = [f"⏸ {execution_id} is waiting for approval:"]
    for p in pending:
        lines.append(f"    call {p.call_id}: {p.summary or p.tool}")
    for p in pending:  # (signed: with NAME's key, under an approvers file)
        lines.append(f"  approve: {decide_command('approve', execution_id, p.call_id, signed=p.signed, flags=address_flag)}")
        lines.append(f"  deny:    {decide_command('deny', execution_id, p.call_id, signed=p.signed, flags=address_flag)}")
    return lines


def outcome_summary(outcome: ExecutionOutcome) -> str:
    calls = len(outcome.tool_calls)
    tail = f"{outcome.duration_ms / 1000:.1f}s · {calls} tool call{'s' if calls != 1 else ''} · {outcome.execution_id}"
    if outcome.success:
        return f"✓ completed in {tail}" + artifact_lines(outcome) + "".join(f"\n  {u}" for u in usage_lines(outcome))
    err = outcome.error
    where = f" (line {err.line})" if err and err.line else ""
    what = f"{err.type}: {err.message}{where}" if err else "failed"
    trace = "".join(f"\n  {ln}" for ln in err.traceback.rstrip().splitlines()) if err and err.traceback else ""
    return f"✗ {what}{trace}\n  after {tail}" + "".join(f"\n  {u}" for u in usage_lines(outcome))


def usage_lines(outcome: ExecutionOutcome | ExecutionAudit) -> list[str]:
    """What the sandboxes cost, per runtime ("usage: modal 2.1s running, 0.0s paused, 2
    sandboxes, 1 replay"); none for Monty, whose steps borrow a pooled process."""
    lines = []
    for runtime, u in outcome.usage.items():
        if runtime == "monty":
            continue
        text = f"usage: {runtime} {u.running_seconds:.1f}s running, {u.paused_seconds:.1f}s paused"
        text += f", {u.sandboxes_created} sandbox{'es' if u.sandboxes_created != 1 else ''}"
        text += f", {u.replays} replay{'s' if u.replays != 1 else ''}"
        if u.released_while_parked:
            text += f", {u.released_while_parked} released while parked"
        lines.append(text)
    return lines


def artifact_lines(outcome: ExecutionOutcome) -> str:
    """The files the execution handed back, and how to fetch them ("" when none)."""
    if not outcome.artifacts:
        return ""
    from codemode.activities.models import human_bytes

    shown = ", ".join(f"{a.name} ({human_bytes(a.size)})" for a in outcome.artifacts[:10])
    more = f" and {len(outcome.artifacts) - 10} more" if len(outcome.artifacts) > 10 else ""
    first = outcome.artifacts[0].name
    return (
        f"\n  artifacts: {shown}{more}"
        f"\n  fetch: codemode artifacts {outcome.execution_id} {first} -o {first.rpartition('/')[2]}"
    )


def status_lines(execution_id: str, status: ExecutionStatus) -> list[str]:
    lines = [f"{execution_id}: {status.state} ({status.runtime})"]
    lines += ["  " + call_line(c) for c in status.tool_calls]
    if status.error:
        lines.append(f"  ✗ {status.error.type}: {status.error.message}")
    if status.stdout:
        lines.append("  stdout:")
        lines += ["    " + ln for ln in status.stdout.rstrip("\n").splitlines()]
    for ignored in status.ignored_signals:
        lines.append(f"  ⚠ {ignored.signal} ignored: {ignored.reason} (input {ignored.payload})")
    for held in status.held_decisions:
        lines.append(f"  ⏳ {held.signal} for call {held.call_id} held: it applies when the call waits (input {held.payload})")
    if status.pending_approvals:
        lines += ["", *approval_help(execution_id, status.pending_approvals)]
    return lines


def _clock(at: datetime) -> str:
    return at.astimezone().strftime("%H:%M:%S.%f")[:-3]


def _audit_call_line(c: CallAudit) -> str:
    extra = []
    if c.duration_ms is not None:
        extra.append(f"{c.duration_ms:.0f} ms")
    if c.retried_after:
        extra.append(f"retried after {c.retried_after.type}: {c.retried_after.message}")
    if c.approval:
        by = f" by {c.approval.by}" if c.approval.by else ""
        door = f" via {c.approval.door}" if c.approval.door else ""
        word = "answered" if c.approval.answered else c.approval.decision
        extra.append(f"{word}{by}{door}")
    return call_line(c) + (f"  [{'; '.join(extra)}]" if extra else "")


def audit_lines(audit: ExecutionAudit) -> list[str]:
    """The timeline, one line per event, calls shown with their final state."""
    calls = {c.call_id: c for c in audit.calls}
    lines = [f"{audit.execution_id}  {audit.status}  runtime={audit.runtime or '?'}"]
    if audit.duration_ms is not None:
        lines[0] += f"  {audit.duration_ms / 1000:.1f}s"
    for ev in audit.events:
        text = ev.text
        if ev.kind == "call" and ev.call_id in calls:
            text = _audit_call_line(calls[ev.call_id])
        elif ev.kind == "approval":
            text = f"⚖ {text}"
        elif ev.kind == "requested":
            text = f"⏸ {text} (call {ev.call_id})"
        elif ev.kind == "completed":
            text = ("✓ " if audit.success else "✗ ") + text
        elif ev.kind == "failed":
            text = f"✗ {text}"
        lines.append(f"  {_clock(ev.at)}  {text}")
    still = [c for c in audit.calls if c.status not in FINAL_CALL_STATES]
    if still and audit.status == "running":
        lines.append("  now:")
        lines += ["    " + call_line(c) for c in still]
    if audit.success and audit.output is not None:
        lines.append(f"  output: {short(audit.output, 200)}")
    lines += [f"  {u}" for u in usage_lines(audit)]
    return lines
