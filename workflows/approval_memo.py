"""What a person sees while calls of ``CodeExecutionWorkflow`` wait: the memo (the UI's "Memo",
``temporal workflow describe``; the inbox lists calls from it) and the current details, written
whenever what waits changes. Workflow code (deterministic)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import CallRequest
    from codemode.approvals.tally import CallTally
    from codemode.workflows.models import PendingApproval
    from codemode.workflows.waiting_words import details, memo_extras


#: How many calls "deny and roll back" would compensate the memo lists (newest first).
MEMO_UNDO_SHOWN = 20


def show_pending(
    execution_id: str,
    pending: list[PendingApproval],
    tallies: dict[str, CallTally],
    starter: str | None = None,
    code: str | None = None,
    undo: list[str] | None = None,
) -> None:
    """What waits for a person, where anyone can see it without a worker: the memo
    (UI "Memo", ``temporal workflow describe``) and the current details (``waiting_words``). ``undo``: what "deny and roll back" would compensate now, newest
    first (None: the run cannot roll back; issue 47)."""
    if not pending:
        workflow.upsert_memo({"pending_approvals": None})
        return
    entries = [_memo_entry(execution_id, p, tallies, starter, undo) for p in pending]
    workflow.upsert_memo({"pending_approvals": entries})
    progress = {c: t.progress() for c, t in tallies.items()}
    workflow.set_current_details(details(execution_id, pending, progress, code))


def _memo_entry(
    execution_id: str,
    p: PendingApproval,
    tallies: dict[str, CallTally],
    starter: str | None,
    undo: list[str] | None = None,
) -> dict[str, Any]:
    tally = tallies.get(p.call_id)
    by = " --by NAME" if tally is not None else ""
    entry: dict[str, Any] = {
        "call_id": p.call_id,
        "tool": p.tool,
        "summary": summary(p),
        "line": p.line,
        "asked_at": p.asked_at.isoformat() if p.asked_at else None,
        "deadline": p.deadline.isoformat() if p.deadline else None,
        "approve_command": f"codemode approve {execution_id} {p.call_id}{by}",
        "deny_command": f"codemode deny {execution_id} {p.call_id}{by}",
        **memo_extras(p, starter),
    }
    if p.can_undo is not None and undo is not None:  # a run that can roll back (issue 47): what people see first
        entry.update(
            can_undo=p.can_undo,
            undo_label=p.undo_label,
            would_compensate=undo[:MEMO_UNDO_SHOWN],
            would_compensate_count=len(undo),
            rollback_command=f"codemode deny {execution_id} {p.call_id} --rollback{by}",
        )
    if tally is None:
        entry["signal_input"] = {"call_id": p.call_id, "by": "your name"}
    else:  # who may decide, and who did so far (the verified approvers)
        gate = tally.gate
        entry.update(
            signed=True,
            rule=gate.rule,
            approvers=gate.approvers_listed,
            required=gate.required,
            approved_by=tally.approvers(),
        )
    return entry


def summary(call: CallRequest | PendingApproval) -> str:
    """How a call is named in summaries, details and the memo (all encrypted by the
    payload codec when keys are set)."""
    return call.summary or f"{call.tool}(...)"
