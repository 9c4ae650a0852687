"""The audit's view of decisions under an approvers file: the same check the workflow applied
(``approvals/tally.py``) replayed over the history, so ``codemode history`` shows a
refused decision as ignored (with why), a counted one as counted, and who decided as the
verified approvers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from codemode.approvals.gate import ApprovalGate, GateInput
from codemode.approvals.signing import DecisionSignature
from codemode.approvals.tally import CallTally, Offer


class SignedDecisions:
    def __init__(self) -> None:
        self.asked: dict[tuple[int, int], GateInput] = {}
        self.tallies: dict[str, CallTally] = {}
        self.starter: str | None = None
        #: Calls decided under the file: the decision's kind, the signatures that decided, its gate.
        self.decided: dict[str, tuple[str, list[DecisionSignature], ApprovalGate]] = {}

    def scheduled(self, run: int, event_id: int, inp: Any) -> None:
        try:
            self.asked[(run, event_id)] = GateInput.model_validate(inp)
        except ValueError:
            pass

    def completed(
        self, execution_id: str, run: int, scheduled_id: int, result: Any, at: datetime
    ) -> ApprovalGate | None:
        """The gate of a call (None when the file was not in force or the result is unreadable)."""
        inp = self.asked.get((run, scheduled_id))
        try:
            gate = ApprovalGate.model_validate(result)
        except ValueError:
            return None
        if inp is None or not gate.configured:
            return None
        self.tallies[inp.call_id] = CallTally(
            execution_id=gate.execution_id or execution_id,
            call_id=inp.call_id,
            args=inp.args,
            kwargs=inp.kwargs,
            gate=gate,
            asked_at=at,
            starter=self.starter,
        )
        return gate

    def offer(
        self, call_id: str, kind: str, signature: Any, decision: Any = None, edited: dict[str, Any] | None = None
    ) -> tuple[str, str] | None:
        """``("ignored", why)``, ``("counted", progress)``, ``("decided", who)``, or None when no
        approvers file governs the call (the decision is taken as before). ``edited``: the
        arguments an edited approval runs with (the asked ones with the person's edits)."""
        tally = self.tallies.get(call_id)
        if tally is None:
            return None
        try:
            sig = DecisionSignature.model_validate(signature) if signature is not None else None
        except ValueError as err:
            return "ignored", f"malformed signature: {err}"
        offer = Offer(kind=kind, signature=sig)  # type: ignore[arg-type]
        if decision is not None:
            offer.edited = edited if edited is not None else decision.arguments
            offer.answered = decision.answer is not None
            offer.answer = decision.answer.value if decision.answer is not None else None
            if offer.answered:
                offer.kind = "answer"
        reason = tally.refusal(offer)
        if reason is not None:
            return "ignored", reason
        deciding = tally.add(offer)
        if deciding is None:
            return "counted", tally.progress()
        del self.tallies[call_id]
        self.decided[call_id] = (offer.kind, deciding, tally.gate)
        return "decided", ", ".join(s.approver for s in deciding)

    def call_of(self, payload: Any) -> str | None:
        """The call a decision's input names (or the one call open under the file)."""
        call = payload.get("call_id", payload.get("callId")) if isinstance(payload, dict) else payload
        if call is None and len(self.tallies) == 1:
            return next(iter(self.tallies))
        return None if call is None or isinstance(call, (dict, list, bool)) else str(call)
