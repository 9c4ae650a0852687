"""``codemode history ID --verify``: every decision of an execution re-checked offline, from its
history and public keys alone (the keys the history recorded when each call asked, or an
approvers file given now).

For each call whose record says approved or denied: the rule that applied (the worker's
``approval_gate`` answer, recorded in the history), and for each signature: whose key it is,
whether it holds over exactly this execution, call, decision and the arguments the call asked
(or the edited ones approved), that the person was allowed and distinct, that enough of them
signed, and that the tool then ran with the arguments they approved. A record altered after
the fact fails here, named by its call."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field
from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import DataConverter

from codemode.activities import names
from codemode.activities.models import ToolInput
from codemode.approvals.approvers_file import ApproversFile
from codemode.approvals.gate import ApprovalGate, GateInput
from codemode.approvals.signing import arguments_sha256, verify_signature
from codemode.client.histories.audit import PayloadDecoder
from codemode.client.histories.decode import _time as _at
from codemode.client.histories.signed_decisions import SignedDecisions
from codemode.workflows.models import ApprovalRecord, Decision, ExecutionOutcome


class CheckedDecision(BaseModel):
    """One call's decision as verified: who, under which rule, with which keys, and any problem."""

    call_id: str
    tool: str = ""
    decision: str = ""
    by: str = ""
    rule: str = ""
    signers: list[str] = Field(default_factory=list)
    keys: list[str] = Field(default_factory=list)
    ok: bool = True
    problems: list[str] = Field(default_factory=list)


class Verification(BaseModel):
    execution_id: str
    #: Whether the history had an approvers file in force for any call.
    signed: bool = False
    closed: bool = False
    decisions: list[CheckedDecision] = Field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(d.ok for d in self.decisions)


class _Fold:
    def __init__(self, decode: PayloadDecoder) -> None:
        self.decode = decode
        self.scheduled: dict[tuple[int, int], tuple[str, Any]] = {}
        self.asked: dict[str, GateInput] = {}
        self.gates: dict[str, ApprovalGate] = {}
        #: The arguments each tool call's activity ran with (the first attempt's schedule).
        self.ran: dict[str, ToolInput] = {}
        self.records: dict[str, ApprovalRecord] = {}
        self.tools: dict[str, str] = {}
        self.outcome: ExecutionOutcome | None = None
        #: ``decide`` Updates: update id -> the call they decide.
        self.update_calls: dict[str, str] = {}
        #: The same check the workflow applied, replayed: decisions the outcome has no record of
        #: (the code review, a run still going) are verified from it.
        self.signed = SignedDecisions()
        self.execution_id = ""
        self.run = 0

    async def feed(self, e: HistoryEvent) -> None:
        kind = e.WhichOneof("attributes")
        if kind == "activity_task_scheduled_event_attributes":
            attrs = e.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name
            if name == names.APPROVAL_GATE:
                inp = _as(GateInput, await self.decode(attrs.input, GateInput))
                if inp is not None:
                    self.scheduled[(self.run, e.event_id)] = (name, inp)
            elif name not in names.NOT_TOOLS:
                tool_input = _as(ToolInput, await self.decode(attrs.input, ToolInput))
                if tool_input is not None and tool_input.call_id not in self.ran:
                    self.ran[tool_input.call_id] = tool_input
                    self.tools[tool_input.call_id] = name
        elif kind == "activity_task_completed_event_attributes":
            attrs = e.activity_task_completed_event_attributes
            found = self.scheduled.get((self.run, attrs.scheduled_event_id))
            if found is not None:
                inp = found[1]
                gate = _as(ApprovalGate, await self.decode(attrs.result, ApprovalGate))
                if gate is not None:
                    self.asked[inp.call_id], self.gates[inp.call_id] = inp, gate
                    self.signed.asked[(self.run, attrs.scheduled_event_id)] = inp
                    self.signed.completed(self.execution_id, self.run, attrs.scheduled_event_id, gate, _at(e))
        elif kind == "workflow_execution_started_event_attributes":
            attrs = e.workflow_execution_started_event_attributes
            if not attrs.continued_execution_run_id:
                req = await self.decode(attrs.input)
                self.signed.starter = req.get("started_by") if isinstance(req, dict) else None
        elif kind == "workflow_execution_signaled_event_attributes":
            attrs = e.workflow_execution_signaled_event_attributes
            if attrs.signal_name in ("approve", "deny"):
                payload = await self.decode(attrs.input)
                call_id = self.signed.call_of(payload)
                if call_id is not None:
                    kind_ = "approve" if attrs.signal_name == "approve" else "deny"
                    signature = payload.get("signature") if isinstance(payload, dict) else None
                    self.signed.offer(call_id, kind_, signature)
        elif kind == "workflow_execution_update_completed_event_attributes":
            attrs = e.workflow_execution_update_completed_event_attributes
            if attrs.outcome.HasField("success"):
                record = _as(ApprovalRecord, await self.decode(attrs.outcome.success, ApprovalRecord))
                call_id = self.update_calls.get(attrs.meta.update_id)
                if record is not None and call_id and record.decision in ("approved", "denied"):
                    self.records.setdefault(call_id, record)
        elif kind == "workflow_execution_update_accepted_event_attributes":
            attrs = e.workflow_execution_update_accepted_event_attributes
            if attrs.accepted_request.input.name == "decide":
                decision = _as(Decision, await self.decode(attrs.accepted_request.input.args, Decision))
                call_id = self.signed.call_of({"call_id": decision.call_id}) if decision is not None else None
                if decision is not None and call_id is not None:
                    self.update_calls[attrs.accepted_request.meta.update_id] = call_id
                    sig = decision.signature.model_dump(mode="json") if decision.signature else None
                    self.signed.offer(call_id, "approve" if decision.approve else "deny", sig, decision)
        elif kind == "workflow_execution_completed_event_attributes":
            self.outcome = _as(
                ExecutionOutcome,
                await self.decode(e.workflow_execution_completed_event_attributes.result, ExecutionOutcome),
            )


def _as(model: type[BaseModel], value: Any) -> Any:
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValueError:
        return None


async def verify_runs(
    execution_id: str,
    runs: Sequence[Sequence[HistoryEvent]],
    converter: DataConverter,
    approvers: ApproversFile | None = None,
) -> Verification:
    """Verify every decision in the histories of an execution's runs (first to latest)."""
    fold = _Fold(PayloadDecoder(converter))
    fold.execution_id = execution_id
    for index, events in enumerate(runs):
        fold.run = index
        for e in events:
            await fold.feed(e)
    records: dict[str, tuple[str, ApprovalRecord]] = {}
    if fold.outcome is not None:
        for rec in fold.outcome.tool_calls:
            if rec.approval is not None:
                records[rec.call_id] = (rec.tool, rec.approval)
    else:  # still running: what the decide Updates returned so far
        records = {c: (fold.tools.get(c, ""), r) for c, r in fold.records.items()}
    for call_id, (kind, sigs, gate) in fold.signed.decided.items():
        if call_id not in records:  # the code review, or a signal-decided call of a run still going
            decision = "denied" if kind == "deny" else "approved"
            by = ", ".join(s.approver for s in sigs)
            record = ApprovalRecord(
                decision=decision, by=by, signatures=sigs, rule=gate.rule, answered=kind == "answer"
            )
            records[call_id] = (gate.tool, record)
    out = Verification(execution_id=execution_id, closed=fold.outcome is not None)
    out.signed = any(g.configured for g in fold.gates.values())
    for call_id, (tool, record) in records.items():
        out.decisions.append(_check(execution_id, call_id, tool, record, fold, approvers))
    return out


def _check(
    execution_id: str, call_id: str, tool: str, record: ApprovalRecord, fold: _Fold, approvers: ApproversFile | None
) -> CheckedDecision:
    checked = CheckedDecision(
        call_id=call_id, tool=tool, decision=record.decision, by=record.by or "", rule=record.rule or ""
    )
    problems = checked.problems
    gate, asked = fold.gates.get(call_id), fold.asked.get(call_id)
    if record.decision == "timed_out":
        return checked
    if gate is None or not gate.configured:
        if record.signatures or record.rule:
            problems.append("the record names a rule or signatures, but no approvers file was in force when it asked")
        checked.ok = not problems
        return checked
    assert asked is not None
    if record.rule and record.rule.startswith("policy."):
        verdict = {"approved": "allow", "denied": "deny"}.get(record.decision)
        if gate.policy_rule != record.rule or gate.verdict != verdict:
            problems.append(
                f"the record says {record.rule} {record.decision} it, but the history's rule check says "
                f"{gate.policy_rule or 'no policy rule'} ({gate.verdict})"
            )
        checked.ok = not problems
        return checked
    if record.rule != gate.rule:
        problems.append(f"the record names rule {record.rule!r}, the history's check {gate.rule!r}")
    if not record.signatures:
        problems.append("applied without a signature under an approvers file")
    edited = record.approved_arguments
    expected_args = arguments_sha256(asked.args, asked.kwargs, edited)
    seen: set[str] = set()
    for sig in record.signatures:
        who = sig.approver
        checked.signers.append(who)
        checked.keys.append(sig.key)
        if not verify_signature(sig):
            problems.append(f"the signature of {sig.signer} does not verify (the record was altered, or forged)")
        holder = gate.keys.get(sig.key) or gate.retired_keys.get(sig.key)
        if approvers is not None:
            listed = {k: n for n, p in approvers.people.items() for k in [*p.keys, *p.retired_keys]}
            holder = listed.get(sig.key)
            if holder is None:
                problems.append(f"the key of {sig.signer} ({sig.key[:20]}…) is not in {approvers.path}")
        elif holder is None:
            problems.append(f"the key of {sig.signer} ({sig.key[:20]}…) was not listed when the call asked")
        if holder is not None and holder != sig.signer:
            problems.append(f"the key {sig.key[:20]}… belongs to {holder}, not {sig.signer}")
        if sig.execution_id != (gate.execution_id or execution_id) or sig.call_id != call_id:
            problems.append(f"{sig.signer} signed call {sig.call_id} of {sig.execution_id}, not this one")
        kind = "deny" if record.decision == "denied" else ("answer" if record.answered else "approve")
        if sig.decision != kind:
            problems.append(f"{sig.signer} signed {sig.decision}, the record says {record.decision}")
        if sig.arguments_sha256 != expected_args:
            problems.append(f"{sig.signer} signed other arguments than the call asked (or than the record approves)")
        if not gate.may_decide(who):
            problems.append(f"{who} was not allowed to decide {gate.tool} (rule {gate.rule})")
        if who in seen:
            problems.append(f"{who} counted twice")
        seen.add(who)
    if record.decision == "approved" and record.signatures and len(seen) < gate.required:
        problems.append(f"{len(seen)} distinct approvers, the rule requires {gate.required}")
    # What ran: the call as asked, or (edited) the approved arguments by name (``approved_arguments``
    # is filled only when a person edited them; an approval as asked leaves it None).
    ran = fold.ran.get(call_id)
    approved = arguments_sha256([], edited) if edited is not None else arguments_sha256(asked.args, asked.kwargs)
    same = ran is None or arguments_sha256(ran.args, ran.kwargs) == approved
    if record.decision == "approved" and not record.answered and not same:
        problems.append("the tool ran with other arguments than the ones approved")
    if record.answered and fold.ran.get(call_id) is not None:
        problems.append("the call was answered by a person, yet its tool ran")
    checked.ok = not problems
    return checked


def verification_lines(v: Verification) -> list[str]:
    """The verification as a person reads it: one line per decision, problems under it."""
    lines = [f"Decisions of {v.execution_id}" + ("" if v.closed else " (still running: the decisions so far)")]
    if not v.signed:
        lines.append(
            "  no approvers file was in force: decisions were not signed (nothing to verify cryptographically)"
        )
    for d in v.decisions:
        mark = "✓" if d.ok else "✗"
        how = f"signed by {', '.join(d.signers)}" if d.signers else ""
        rule = f"rule {d.rule}" if d.rule else ""
        detail = "; ".join(x for x in (how, rule) if x)
        lines.append(
            f"  {mark} call {d.call_id} ({d.tool}): {d.decision} by {d.by or '?'}" + (f" [{detail}]" if detail else "")
        )
        for key in d.keys:
            lines.append(f"      key {key}")
        for problem in d.problems:
            lines.append(f"      ✗ {problem}")
    bad = [d.call_id for d in v.decisions if not d.ok]
    lines.append("verified: every decision holds" if not bad else f"NOT verified: call(s) {', '.join(bad)}")
    return lines
