"""Which decisions count: the one check the workflow applies to every decision (signal or
Update), and that ``codemode history`` and ``--verify`` apply again to the history.

Pure and deterministic: everything it reads is in the history (the call, its ``ApprovalGate``
with the keys of its time, the decision and its signature, the workflow's clock).

``strict`` (runs of generation-45, issue 45): names are resolved to people (aliases), ``"*"``
means the listed people, a service never counts as an approver, a signature must cover the
run, the comment and the door (version 2) and not be dated in the future, a decision is judged
again against the file as it is when it arrives (``fresh``: a key removed since the call asked
no longer counts), and four eyes trusts only an authenticated starter: with none, the call
needs one distinct approver more than the rule says, so that at least ``required`` of them
are not whoever started the run."""

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
    #: The comment or reason, and the door, as the decision carries them (a version 2
    #: signature covers both).
    comment: str | None = None
    door: str | None = None
    #: "Deny and roll back" (issue 47).
    rollback: bool = False


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
    #: Runs of generation-45: the rules of issue 45 (see the module's docstring).
    strict: bool = False
    #: The run a signature must name (the first run id of the execution's chain).
    run_id: str | None = None
    #: The file as it was when the last decisions were judged (strict: a recheck).
    fresh: ApprovalGate | None = None

    def approvers(self) -> list[str]:
        if self.strict:
            return [self.gate.resolve(s.approver) or s.approver for sigs in self.counted.values() for s in sigs]
        return [s.approver for sigs in self.counted.values() for s in sigs]

    def needed(self) -> int:
        """Distinct approvals that decide the call (strict: see the module's docstring)."""
        if not self.strict:
            return self.gate.required
        required = max(self.gate.required, self.fresh.required if self.fresh is not None else 1)
        return required + (1 if self.four_eyes and self.gate.starter is None else 0)

    @property
    def four_eyes(self) -> bool:
        return self.gate.four_eyes or (self.fresh is not None and self.fresh.four_eyes)

    def refusal(self, offer: Offer, *, now: datetime | None = None) -> str | None:
        """Why ``offer`` cannot count for this call (None: it counts). ``now`` (strict): when it
        is judged, from the history (a signature dated after it, beyond the skew, is refused)."""
        gate, sig = self.gate, offer.signature
        if not gate.configured:
            return None
        if self.strict:
            return self._strict_refusal(offer, now)
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
        claims = self._claims_refusal(sig, offer)
        if claims is not None:
            return claims
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

    def _claims_refusal(self, sig: DecisionSignature, offer: Offer) -> str | None:
        """Whether the signature holds, over this execution, call, decision (and whether it rolls
        back), arguments and answer."""
        if not verify_signature(sig):
            return f"the signature of {sig.signer} does not verify (forged or altered)"
        if sig.execution_id != self.execution_id:
            return f"signed for execution {sig.execution_id}, not {self.execution_id} (replayed?)"
        if sig.call_id != self.call_id:
            return f"signed for call {sig.call_id}, not call {self.call_id} (replayed from another call?)"
        if sig.decision != offer.kind:
            return f"signed as {sig.decision}, sent as {offer.kind}"
        if sig.rollback != offer.rollback:
            signed, sent = ("deny and roll back", "a plain deny") if sig.rollback else ("a plain deny", "deny and roll back")
            return f"signed as {signed}, sent as {sent}"
        if sig.arguments_sha256 != arguments_sha256(self.args, self.kwargs, offer.edited):
            return "signed over other arguments than the ones this decision approves"
        has_answer = offer.answered or offer.kind == "answer"
        if sig.answer_sha256 != (answer_sha256(offer.answer) if has_answer else None):
            return "signed over another answer than the one this decision gives"
        return None

    def _strict_refusal(self, offer: Offer, now: datetime | None) -> str | None:
        gate, sig = self.gate, offer.signature
        if sig is None:
            return (
                "unsigned: the approvers file requires a signed decision "
                f"(codemode {_verb(offer.kind)} {self.execution_id} {self.call_id} --by NAME signs with NAME's key)"
            )
        if sig.v < 2:
            return "signed by an older door: the signature covers neither the comment, the door nor the run (update it)"
        gates = [gate] if self.fresh is None else [gate, self.fresh]
        for g in gates:
            if sig.key not in g.keys:
                since = " since the call asked" if g is self.fresh else ""
                if sig.key in g.retired_keys:
                    return f"signed with a retired key of {g.retired_keys[sig.key]} ({_short(sig.key)}){since}: sign with a current key"
                return f"signed with a key the approvers file does not list ({_short(sig.key)}){since}"
            if g.keys[sig.key] != sig.signer:
                return f"the key {_short(sig.key)} belongs to {g.keys[sig.key]}, not {sig.signer}"
        claims = self._claims_refusal(sig, offer)
        if claims is not None:
            return claims
        if self.run_id and sig.run_id != self.run_id:
            return f"signed for run {sig.run_id} of {sig.execution_id}, not this run {self.run_id} (replayed?)"
        if sig.comment != offer.comment:
            return "signed over another comment than the one this decision carries"
        if sig.door != offer.door:
            return f"signed for the door {sig.door}, sent through {offer.door}"
        if offer.door == "link" and not all(g.links for g in gates):
            return f"rule {gate.rule} takes no decision through a link: decide in the inbox or with codemode approve"
        if _aware(sig.signed_at) < _aware(self.asked_at) - CLOCK_SKEW:
            return f"signed at {_aware(sig.signed_at).isoformat()}, before call {self.call_id} asked (replayed?)"
        if now is not None and _aware(sig.signed_at) > _aware(now) + CLOCK_SKEW:
            return f"signed at {_aware(sig.signed_at).isoformat()}, in the future (the file was read at {_aware(now).isoformat()})"
        for g in gates:
            if sig.on_behalf_of is None and g.is_service(sig.signer):
                return f"{sig.signer} signs for others (a service): its own decision counts for nobody"
            if sig.on_behalf_of is not None:
                if not g.is_service(sig.signer):
                    return f"{sig.signer} signs for nobody but themself (no signs_for in the approvers file)"
                if not g.may_sign_for(sig.signer, sig.on_behalf_of, strict=True):
                    return f"{sig.signer} may not sign for {sig.on_behalf_of} (signs_for in the approvers file)"
        person = gate.resolve(sig.approver) or sig.approver
        for g in gates:
            if not g.may_decide(person, strict=True):
                listed = ", ".join(g.approvers_listed) or "nobody"
                since = " (the approvers file now)" if g is self.fresh else ""
                return f"{person} may not decide {g.tool} (rule {g.rule} allows: {listed}){since}"
        if self.four_eyes:
            if gate.starter is not None and person == gate.starter:
                return f"four eyes: {person} started this run and may not decide its calls (rule {gate.rule})"
            if gate.starter is None and person == gate.starter_claimed:
                return f"four eyes: this run says {person} started it, who may not decide its calls (rule {gate.rule})"
        if person in self.approvers():
            return f"{person} already decided call {self.call_id}: it needs {self.needed()} distinct approvers"
        return None

    def revoked(self) -> list[tuple[DecisionSignature, str]]:
        """Strict, after a recheck: counted approvals that no longer count (their key removed
        or retired, their person no longer allowed), taken out of the count, with why."""
        fresh = self.fresh
        if fresh is None:
            return []
        out: list[tuple[DecisionSignature, str]] = []
        for agreed, sigs in list(self.counted.items()):
            for sig in list(sigs):
                why = None
                if fresh.keys.get(sig.key) != sig.signer:
                    why = f"{sig.signer}'s key ({_short(sig.key)}) is no longer current in the approvers file"
                elif sig.on_behalf_of is not None and not fresh.may_sign_for(sig.signer, sig.on_behalf_of, strict=True):
                    why = f"{sig.signer} may no longer sign for {sig.on_behalf_of}"
                elif not fresh.may_decide(self.gate.resolve(sig.approver) or sig.approver, strict=True):
                    why = f"{sig.approver} may no longer decide {fresh.tool} (rule {fresh.rule})"
                if why is not None:
                    sigs.remove(sig)
                    out.append((sig, why))
            if not sigs:
                del self.counted[agreed]
        return out

    def add(self, offer: Offer) -> list[DecisionSignature] | None:
        """Count an accepted approval (``refusal`` was None): the signatures that decide the
        call once enough distinct people agree, else None (it waits for more)."""
        assert offer.signature is not None
        key = (offer.kind, offer.signature.arguments_sha256, offer.signature.answer_sha256)
        sigs = self.counted.setdefault(key, [])
        sigs.append(offer.signature)
        if offer.kind == "deny" or len(sigs) >= self.needed():
            return list(sigs)
        return None

    def progress(self) -> str:
        """``1 of 2 approvals (ana)``, for the memo and the details."""
        names = self.approvers()
        if not names:
            return ""
        return f"{len(names)} of {self.needed()} approvals ({', '.join(names)})"


def _verb(kind: str) -> str:
    return {"approve": "approve", "deny": "deny", "answer": "answer"}[kind]


def _short(key: str) -> str:
    return key if len(key) <= 24 else key[:20] + "…"


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
