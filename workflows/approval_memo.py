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


def show_pending(execution_id: str, pending: list[PendingApproval], tallies: dict[str, CallTally]) -> None:
    """What waits for a person, where anyone can see it without a worker: the memo
    (UI "Memo", ``temporal workflow describe``) and the current details."""
    if not pending:
        workflow.upsert_memo({"pending_approvals": None})
        return
    entries = [_memo_entry(execution_id, p, tallies) for p in pending]
    workflow.upsert_memo({"pending_approvals": entries})
    lines = [f"**Awaiting approval** ({len(pending)} call{'s' if len(pending) != 1 else ''}):", ""]
    signed = False
    for p in pending:
        tally = tallies.get(p.call_id)
        by = " --by NAME" if tally is not None else ""
        signed = signed or tally is not None
        progress = f" ({tally.progress()})" if tally is not None and tally.progress() else ""
        lines.append(
            f"- call `{p.call_id}`: `{summary(p)}`{progress} — approve with "
            f"`codemode approve {execution_id} {p.call_id}{by}` or deny with `codemode deny {execution_id} {p.call_id}{by}`"
        )
    first = pending[0].call_id
    lines.append("")
    if signed:
        lines.append(
            "Decisions must be signed by a person the approvers file allows (`codemode keygen --approver NAME`)."
        )
    else:
        lines.append(
            f'Or use *Send a Signal*: name `approve` (or `deny`), input `{{"call_id": "{first}", "by": "your name"}}`.'
        )
    workflow.set_current_details("\n".join(lines))

def _memo_entry(execution_id: str, p: PendingApproval, tallies: dict[str, CallTally]) -> dict[str, Any]:
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
    }
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
