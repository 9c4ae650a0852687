"""Approval bookkeeping of ``CodeExecutionWorkflow``: the calls waiting for a person, the
decisions taken (signals ``approve``/``deny``, update ``decide``) and the ignored ones, and what
a person sees while a call waits (memo and current details). Workflow code (deterministic);
the handlers stay on the workflow class and delegate here."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.decision_checks import approved_arguments, check_answer, conform_answer
    from codemode.activities.models import CallRequest
    from codemode.workflows.approval_notices import Notices
    from codemode.workflows.models import (
        CODE_APPROVAL_ID,
        ApprovalRecord,
        Decision,
        ErrorInfo,
        ExecutionState,
        IgnoredSignal,
        PendingApproval,
        read_decision,
    )

#: Ignored decisions kept for the status and carried into the next run.
MAX_IGNORED = 50


class Approvals:
    """Pending calls by id, decisions by call id, and the signals that decided nothing."""

    def __init__(self, set_state: Callable[[ExecutionState], None]) -> None:
        self.pending: dict[str, PendingApproval] = {}
        self.decisions: dict[str, ApprovalRecord] = {}
        self.ignored: list[IgnoredSignal] = []
        #: Answers a person gave instead of the tool, by call id (the call's result).
        self.answers: dict[str, Any] = {}
        #: Notifications of what waits and what was decided (``workflows/approval_notices.py``).
        self.notices = Notices()
        self._set_state = set_state

    def on_signal(self, name: str, payload: Any) -> None:
        read = read_decision(name, payload, self.undecided())
        if isinstance(read, IgnoredSignal):
            workflow.logger.warning("%s signal ignored: %s", name, read.reason)
            self.ignored = [*self.ignored, read][-MAX_IGNORED:]
            return
        call_id, by, text = read
        self.decisions[call_id] = ApprovalRecord(
            decision="approved" if name == "approve" else "denied",
            by=by,
            comment=text,
            asked_arguments=self.pending[call_id].arguments,
            door="signal",
        )

    def decide(self, decision: Decision) -> ApprovalRecord:
        call_id = self._decide_target(decision)
        asked = self.pending[call_id].arguments
        record = ApprovalRecord(
            decision="approved" if decision.approve else "denied",
            by=decision.by,
            comment=decision.comment,
            asked_arguments=asked,
            door=decision.door,
        )
        if decision.approve and decision.answer is not None:
            record.answered = True
            # As the tool returns it (0 -> 0.0 for a float): the code sees the tool's type.
            self.answers[call_id] = conform_answer(self.pending[call_id].returns_schema, decision.answer.value)
        elif decision.approve and decision.arguments is not None:
            record.approved_arguments = self._edited(call_id, decision.arguments)
        self.decisions[call_id] = record
        return record

    def validate_decide(self, decision: Decision) -> None:
        """Refuse (before anything is recorded) a decision that cannot be applied: no such
        call, nobody named, edited arguments or an answer that do not fit the tool."""
        call_id = self._decide_target(decision)
        if not decision.by.strip():
            raise ValueError("say who decides: by must not be empty")
        if decision.arguments is not None and decision.answer is not None:
            raise ValueError("give edited arguments or an answer, not both")
        if not decision.approve and (decision.arguments is not None or decision.answer is not None):
            raise ValueError("a denial takes a reason only: edited arguments and answers go with an approval")
        if call_id == CODE_APPROVAL_ID and (decision.arguments is not None or decision.answer is not None):
            raise ValueError("the code's review is approved or denied as it is")
        if decision.arguments is not None:
            self._edited(call_id, decision.arguments)
        if decision.answer is not None:
            try:
                check_answer(self.pending[call_id].returns_schema, decision.answer.value)
            except ValueError as err:
                raise ValueError(f"the answer does not fit what {self.pending[call_id].tool} returns: {err}") from None

    def _edited(self, call_id: str, edits: dict[str, Any]) -> dict[str, Any]:
        pending = self.pending[call_id]
        if pending.arguments is None:
            raise ValueError(f"call {call_id} was recorded without its arguments by name: approve it as it is")
        try:
            return approved_arguments(pending.parameters_schema, pending.arguments, edits)
        except ValueError as err:
            raise ValueError(f"the edited arguments do not fit {pending.tool}: {err}") from None

    def _decide_target(self, decision: Decision) -> str:
        read = read_decision("decide", {"call_id": decision.call_id, "by": decision.by}, self.undecided())
        if isinstance(read, IgnoredSignal):
            raise ValueError(read.reason)
        return read[0]

    def undecided(self) -> list[str]:
        return [c for c in self.pending if c not in self.decisions]

    async def review_call(self, call: CallRequest, timeout: timedelta) -> ApprovalRecord:
        """Park ``call`` until a person decides it (or ``timeout`` passes): the decision."""
        review = PendingApproval(
            call_id=call.call_id,
            tool=call.tool,
            args=call.args,
            kwargs=call.kwargs,
            summary=call.summary,
            arguments=call.arguments,
            parameters_schema=call.parameters_schema,
            returns_schema=call.returns_schema,
            line=call.line,
            reason=call.approval_reason,
        )
        return await self.wait_for(review, timeout)

    async def wait_for(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord:
        """Park until a person decides ``review`` (or ``timeout`` passes): the decision."""
        execution_id = workflow.info().workflow_id
        review.asked_at = workflow.now()
        review.deadline = review.asked_at + timeout
        self.pending[review.call_id] = review
        self._set_state("awaiting_approval")
        self.show_pending(execution_id)
        self.notices.send("approval.requested", review)
        try:
            await workflow.wait_condition(
                lambda: review.call_id in self.decisions,
                timeout=timeout,
                timeout_summary=f"approval of call {review.call_id} ({review.tool}) times out",
            )
            decision = self.decisions[review.call_id]
        except asyncio.TimeoutError:
            decision = ApprovalRecord(
                decision="timed_out", comment=f"no decision within {timeout}", asked_arguments=review.arguments
            )
        # Not in a finally: on eviction the coroutine is closed and must not touch workflow APIs.
        del self.pending[review.call_id]
        expired = decision.decision == "timed_out"
        self.notices.send("approval.expired" if expired else "approval.decided", review, decision)
        self.show_pending(execution_id)
        if not self.pending:
            self._set_state("running")
            verb = {"approved": "Approved", "denied": "Denied", "timed_out": "No decision in time for"}[decision.decision]
            by = f" by {decision.by}" if decision.by and decision.decision != "timed_out" else ""
            workflow.set_current_details(f"{verb} `{summary(review)}`{by}; running on")
        return decision

    def show_pending(self, execution_id: str) -> None:
        """What waits for a person, where anyone can see it without a worker: the memo
        (UI "Memo", ``temporal workflow describe``) and the current details."""
        pending = [p for p in self.pending.values() if p.call_id not in self.decisions]
        if not pending:
            workflow.upsert_memo({"pending_approvals": None})
            return
        entries = [
            {
                "call_id": p.call_id,
                "tool": p.tool,
                "summary": summary(p),
                "line": p.line,
                "asked_at": p.asked_at.isoformat() if p.asked_at else None,
                "deadline": p.deadline.isoformat() if p.deadline else None,
                "approve_command": f"codemode approve {execution_id} {p.call_id}",
                "deny_command": f"codemode deny {execution_id} {p.call_id}",
                "signal_input": {"call_id": p.call_id, "by": "your name"},
            }
            for p in pending
        ]
        workflow.upsert_memo({"pending_approvals": entries})
        lines = [f"**Awaiting approval** ({len(pending)} call{'s' if len(pending) != 1 else ''}):", ""]
        for p in pending:
            lines.append(
                f"- call `{p.call_id}`: `{summary(p)}` — approve with `codemode approve {execution_id} {p.call_id}`"
                f" or deny with `codemode deny {execution_id} {p.call_id}`"
            )
        first = pending[0].call_id
        lines.append("")
        lines.append(
            f'Or use *Send a Signal*: name `approve` (or `deny`), input `{{"call_id": "{first}", "by": "your name"}}`.'
        )
        workflow.set_current_details("\n".join(lines))


def summary(call: CallRequest | PendingApproval) -> str:
    """How a call is named in summaries, details and the memo (all encrypted by the
    payload codec when keys are set)."""
    return call.summary or f"{call.tool}(...)"


def permission_error(what: str, decision: ApprovalRecord) -> ErrorInfo:
    if decision.decision == "denied":
        by = f" by {decision.by}" if decision.by else ""
        why = f": {decision.comment}" if decision.comment else ""
        return ErrorInfo(type="PermissionError", message=f"{what} was denied{by}{why}", kind="denied")
    return ErrorInfo(type="PermissionError", message=f"{what} was not approved in time", kind="denied")
