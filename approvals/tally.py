"""Which decisions count: the one check the workflow applies to every decision (signal or
Update), and that ``codemode history`` and ``--verify`` apply again to the history.

Pure and deterministic: everything it reads is in the history (the call, its ``ApprovalGate``
with the keys of its time, the decision and its signature, the workflow's clock)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from codemode.approvals.gate import ApprovalGate
from codemode.approvals.signing import (
    DecisionKind,
    DecisionSignature,
    answer_sha256,
    arguments_sha256,
    verify_signature,
)

#: A signature made this long before the call asked is still taken (clocks differ); earlier
#: ones cannot be for this call (a decision replayed from an earlier execution of the same id).
CLOCK_SKEW = timedelta(minutes=5)


@dataclass
class Offer:
    """One decision as it arrived (from a signal or the ``decide`` Update)."""

    kind: DecisionKind
    signature: DecisionSignature | None = None
    #: Edited arguments approved instead of the asked ones (None: as asked).
    edited: dict[str, Any] | None = None
    answer: Any = None
    answered: bool = False


@dataclass
class CallTally:
    """A call waiting for a decision under an approvers file: the approvals counted so far."""

    execution_id: str
    call_id: str
    args: list[Any]
    kwargs: dict[str, Any]
    gate: ApprovalGate
    asked_at: datetime
    starter: str | None = None
    #: Counted approvals (or answers), by what they agree on: (kind, arguments, answer).
    counted: dict[tuple[str, str, str | None], list[DecisionSignature]] = field(default_factory=dict)

    def approvers(self) -> list[str]:
        return [s.approver for sigs in self.counted.values() for s in sigs]

    def refusal(self, offer: Offer) -> str | None:
        """Why ``offer`` cannot count for this call (None: it counts)."""
        gate, sig = self.gate, offer.signature
        if not gate.configured:
            return None
        if sig is None:
            return (
                "unsigned: the approvers file requires a signed decision "
                f"(codemode {_verb(offer.kind)} {self.execution_id} {self.call_id} --by NAME signs with NAME's key)"
            )
        if sig.key not in gate.keys:
            if sig.key in gate.retired_keys:
                return f"signed with a retired key of {gate.retired_keys[sig.key]} ({_short(sig.key)}): sign with a current key"
            return f"signed with a key the approvers file does not list ({_short(sig.key)})"
        holder = gate.keys[sig.key]
        if holder != sig.signer:
            return f"the key {_short(sig.key)} belongs to {holder}, not {sig.signer}"
        if not verify_signature(sig):
            return f"the signature of {sig.signer} does not verify (forged or altered)"
        if sig.execution_id != self.execution_id:
            return f"signed for execution {sig.execution_id}, not {self.execution_id} (replayed?)"
        if sig.call_id != self.call_id:
            return f"signed for call {sig.call_id}, not call {self.call_id} (replayed from another call?)"
        if sig.decision != offer.kind:
            return f"signed as {sig.decision}, sent as {offer.kind}"
        if sig.arguments_sha256 != arguments_sha256(self.args, self.kwargs, offer.edited):
            return "signed over other arguments than the ones this decision approves"
        has_answer = offer.answered or offer.kind == "answer"
        if sig.answer_sha256 != (answer_sha256(offer.answer) if has_answer else None):
            return "signed over another answer than the one this decision gives"
        if _aware(sig.signed_at) < _aware(self.asked_at) - CLOCK_SKEW:
            return f"signed at {_aware(sig.signed_at).isoformat()}, before call {self.call_id} asked (replayed?)"
        if sig.on_behalf_of is not None:
            allowed = gate.signs_for.get(sig.signer, [])
            if "*" not in allowed and sig.on_behalf_of not in allowed:
                return f"{sig.signer} may not sign for {sig.on_behalf_of} (signs_for in the approvers file)"
        person = sig.approver
        if not gate.may_decide(person):
            listed = ", ".join(gate.approvers_listed) or "nobody"
            return f"{person} may not decide {gate.tool} (rule {gate.rule} allows: {listed})"
        if gate.four_eyes:
            if self.starter is None:
                return "four eyes: this run does not say who started it, so nobody can be told apart from its starter"
            if person == self.starter:
                return f"four eyes: {person} started this run and may not decide its calls (rule {gate.rule})"
        if person in self.approvers():
            return f"{person} already decided call {self.call_id}: it needs {gate.required} distinct approvers"
        return None

    def add(self, offer: Offer) -> list[DecisionSignature] | None:
        """Count an accepted approval (``refusal`` was None): the signatures that decide the
        call once enough distinct people agree, else None (it waits for more)."""
        assert offer.signature is not None
        key = (offer.kind, offer.signature.arguments_sha256, offer.signature.answer_sha256)
        sigs = self.counted.setdefault(key, [])
        sigs.append(offer.signature)
        if offer.kind == "deny" or len(sigs) >= self.gate.required:
            return list(sigs)
        return None

    def progress(self) -> str:
        """``1 of 2 approvals (ana)``, for the memo and the details."""
        names = self.approvers()
        if not names:
            return ""
        return f"{len(names)} of {self.gate.required} approvals ({', '.join(names)})"


def _verb(kind: str) -> str:
    return {"approve": "approve", "deny": "deny", "answer": "answer"}[kind]


def _short(key: str) -> str:
    return key if len(key) <= 24 else key[:20] + "…"


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
