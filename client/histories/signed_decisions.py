"""The audit's view of decisions under an approvers file: the same check the workflow applied
(``approvals/tally.py``) replayed over the history, so ``codemode history`` shows a
refused decision as ignored (with why), a counted one as counted, and who decided as the
verified approvers.

A run of generation-45 (issue 45, ``workflows/approval_checks.py``) pins the approvers file it
first saw, and judges a decision in two steps: when it arrives (the checks against the call's
gate: refused, or queued), then when a worker read the file again (a recheck gate whose input
names the queued decisions: counted, deciding, or refused). This fold does the same with the
events, so the audit and ``--verify`` judge each decision as the workflow did."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from codemode.approvals.gate import ApprovalGate, GateInput, RecheckedOffer, pin_problem
from codemode.approvals.signing import DecisionSignature
from codemode.approvals.tally import CallTally, Offer


@dataclass
class Judged:
    """One decision as a recheck judged it: ``word`` is ``ignored``, ``counted`` or ``decided``."""

    offer: RecheckedOffer
    word: str
    text: str
    signatures: list[DecisionSignature] = field(default_factory=list)


class SignedDecisions:
    def __init__(self) -> None:
        self.asked: dict[tuple[int, int], GateInput] = {}
        self.tallies: dict[str, CallTally] = {}
        self.starter: str | None = None
        #: Calls decided under the file: the decision's kind, the signatures that decided, its gate.
        self.decided: dict[str, tuple[str, list[DecisionSignature], ApprovalGate]] = {}
        #: The run takes issue 45's rules (its history has the generation-45 marker).
        self.strict = False
        #: The first run id of the chain (what a version 2 signature names).
        self.run_id: str | None = None
        #: The approvers file the run pinned (strict), and every file (or none) its gates came from.
        self.pinned: str | None = None
        self.files: dict[str, str] = {}
        #: Calls the run refused because no gate it may take answered (strict): why.
        self.refused: dict[str, str] = {}
        #: Counted approvals a recheck took out again (their key revoked): (call, signature, why).
        self.revoked: list[tuple[str, DecisionSignature, str]] = []

    def scheduled(self, run: int, event_id: int, inp: Any) -> None:
        try:
            self.asked[(run, event_id)] = GateInput.model_validate(inp)
        except ValueError:
            pass

    def completed(
        self, execution_id: str, run: int, scheduled_id: int, result: Any, at: datetime
    ) -> ApprovalGate | None:
        """The gate of a call's first ask (None when the file was not in force, the result is
        unreadable, or the run refused the gate: then ``refused`` says why)."""
        inp = self.asked.get((run, scheduled_id))
        try:
            gate = ApprovalGate.model_validate(result)
        except ValueError:
            return None
        if inp is None or inp.recheck is not None:
            return None
        self.files[inp.call_id] = gate.file_sha256 if gate.configured else ""
        if self.strict:
            problem = pin_problem(self.pinned, gate, recheck=False)
            if problem is not None:
                self.refused[inp.call_id] = problem
                return None
            if gate.configured:
                self.pinned = gate.file_sha256
        if not gate.configured:
            return None
        self.tallies[inp.call_id] = CallTally(
            execution_id=gate.execution_id or execution_id,
            call_id=inp.call_id,
            args=inp.args,
            kwargs=inp.kwargs,
            gate=gate,
            asked_at=(gate.checked_at or at) if self.strict else at,
            starter=self.starter,
            strict=self.strict,
            run_id=self.run_id if self.strict else None,
        )
        return gate

    def failed(self, run: int, scheduled_id: int, why: str) -> tuple[GateInput, str] | None:
        """A gate activity that failed for good (strict): the call's first ask refuses the call,
        a recheck refuses the decisions it names. The input, and the refusal's words."""
        inp = self.asked.get((run, scheduled_id))
        if inp is None or not self.strict:
            return None
        text = f"no worker could check the call against the approvers file in time: {why}"
        if inp.recheck is None:
            self.refused[inp.call_id] = text
        return inp, text

    def rechecked(self, run: int, scheduled_id: int, result: Any) -> list[Judged]:
        """The decisions a recheck gate names, judged as the workflow judged them."""
        inp = self.asked.get((run, scheduled_id))
        if inp is None or inp.recheck is None:
            return []
        tally = self.tallies.get(inp.call_id)
        try:
            fresh = ApprovalGate.model_validate(result)
        except ValueError:
            fresh = None
        problem = "unreadable" if fresh is None else pin_problem(self.pinned, fresh, recheck=True)
        if tally is None or fresh is None or problem is not None:
            return [Judged(o, "ignored", f"not judged: {problem}") for o in inp.recheck]
        tally.fresh = fresh
        for sig, why in tally.revoked():
            self.revoked.append((inp.call_id, sig, why))
        out: list[Judged] = []
        for item in inp.recheck:
            if inp.call_id in self.decided:
                out.append(Judged(item, "ignored", f"call {inp.call_id} was already decided"))
                continue
            offer = _offer_of(item)
            if isinstance(offer, str):
                out.append(Judged(item, "ignored", offer))
                continue
            reason = tally.refusal(offer, now=fresh.checked_at)
            if reason is not None:
                out.append(Judged(item, "ignored", reason))
                continue
            deciding = tally.add(offer)
            if deciding is None:
                out.append(Judged(item, "counted", tally.progress()))
                continue
            self.decided[inp.call_id] = (offer.kind, deciding, tally.gate)
            out.append(Judged(item, "decided", ", ".join(s.approver for s in deciding), deciding))
        if inp.call_id in self.decided:
            del self.tallies[inp.call_id]
        return out

    def offer(
        self,
        call_id: str,
        kind: str,
        signature: Any,
        decision: Any = None,
        edited: dict[str, Any] | None = None,
        comment: str | None = None,
        rollback: bool = False,
    ) -> tuple[str, str] | None:
        """``("ignored", why)``, ``("counted", progress)``, ``("decided", who)``, ``("queued",
        "")`` (strict: judged again at the next recheck), or None when no approvers file
        governs the call (the decision is taken as before). ``edited``: the arguments an
        edited approval runs with (the asked ones with the person's edits)."""
        tally = self.tallies.get(call_id)
        if tally is None:
            return None
        try:
            sig = DecisionSignature.model_validate(signature) if signature is not None else None
        except ValueError as err:
            return "ignored", f"malformed signature: {err}"
        offer = Offer(kind=kind, signature=sig, rollback=rollback)  # type: ignore[arg-type]
        if decision is not None:
            offer.rollback = bool(getattr(decision, "rollback", False))
            offer.edited = edited if edited is not None else decision.arguments
            offer.answered = decision.answer is not None
            offer.answer = decision.answer.value if decision.answer is not None else None
            if offer.answered:
                offer.kind = "answer"
        if self.strict:
            offer.comment = decision.comment if decision is not None else comment
            offer.door = decision.door if decision is not None else (sig.door if sig is not None else None)
        reason = tally.refusal(offer)
        if reason is not None:
            return "ignored", reason
        if self.strict:
            return "queued", ""
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


def _offer_of(item: RecheckedOffer) -> Offer | str:
    try:
        sig = DecisionSignature.model_validate(item.signature) if item.signature is not None else None
    except ValueError as err:
        return f"malformed signature: {err}"
    return Offer(
        kind=item.kind,
        signature=sig,
        edited=item.edited,
        answer=item.answer,
        answered=item.answered,
        comment=item.comment,
        door=item.door,
        rollback=item.rollback,
    )
