"""Approval bookkeeping of ``CodeExecutionWorkflow``: the calls waiting for a person, the
decisions taken (signals ``approve``/``deny``, update ``decide``) and the ignored ones, and what
a person sees while a call waits (memo and current details). Workflow code (deterministic);
the handlers stay on the workflow class and delegate here."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.models import CallRequest
    from codemode.approvals.decision_checks import approved_arguments, check_answer, conform_answer
    from codemode.approvals.gate import ApprovalGate, GateInput
    from codemode.approvals.signing import DecisionSignature
    from codemode.approvals.tally import CallTally, Offer
    from codemode.workflows.approval_notices import Notices
    from codemode.workflows.early_decisions import EarlyDecisions
    from codemode.workflows.models import (
        CODE_APPROVAL_ID,
        ApprovalRecord,
        CodeExecutionRequest,
        Decision,
        ErrorInfo,
        ExecutionState,
        HeldDecision,
        IgnoredSignal,
        PendingApproval,
        call_order,
        decision_target,
        read_decision,
    )
    from codemode.workflows.versions import Versions

#: Ignored decisions kept for the status and carried into the next run.
MAX_IGNORED = 50
#: Histories recorded before approvers files (issue 37) ask no ``approval_gate`` activity.
APPROVERS_PATCH = "approvers-gate"
GATE_TIMEOUT = timedelta(seconds=30)


class Approvals:
    """Pending calls by id, decisions by call id, and the signals that decided nothing."""

    def __init__(self, set_state: Callable[[ExecutionState], None], versions: Versions) -> None:
        self.versions = versions
        self.pending: dict[str, PendingApproval] = {}
        self.decisions: dict[str, ApprovalRecord] = {}
        self.ignored: list[IgnoredSignal] = []
        #: Answers a person gave instead of the tool, by call id (the call's result).
        self.answers: dict[str, Any] = {}
        #: Notifications of what waits and what was decided (``workflows/approval_notices.py``).
        self.notices = Notices(versions)
        self._set_state = set_state
        #: Calls waiting under an approvers file: their gate and the approvals counted so far.
        self.tallies: dict[str, CallTally] = {}
        #: Who started the run (``CodeExecutionRequest.started_by``), for four-eyes rules.
        self.starter: str | None = None
        #: Decisions that came before their call waited (``workflows/early_decisions.py``):
        #: signals are applied when the call begins to wait (``wait_for``); Updates wait in
        #: their handler (``hold_update``).
        self.early = EarlyDecisions(versions)

    def begin(self, req: CodeExecutionRequest) -> None:
        """The run's code (for notices) and who started it (for four-eyes rules)."""
        self.notices.code = req.code
        self.starter = req.started_by

    def waiting(self) -> bool:
        return bool(self.pending)

    def on_signal(self, name: str, payload: Any) -> None:
        if self._holds(decision_target(payload)):
            self.early.hold(name, payload, _shown(payload))
            return
        read = read_decision(name, payload, self.undecided())
        if isinstance(read, IgnoredSignal):
            read.reason = self._already(decision_target(payload)) or read.reason
            self._ignore(read)
            return
        call_id, by, text = read
        raw = payload.get("signature") if isinstance(payload, dict) else None
        try:
            signature = DecisionSignature.model_validate(raw) if raw is not None else None
        except ValueError as err:
            self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=f"malformed signature: {err}"))
            return
        offer = Offer(kind="approve" if name == "approve" else "deny", signature=signature)
        reason = self._refusal(call_id, offer)
        if reason is not None:
            self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=reason))
            return
        asked = self.pending[call_id].arguments
        record = ApprovalRecord(decision=_word(offer), by=by, comment=text, asked_arguments=asked, door="signal")
        self._apply(call_id, offer, record)

    def _holds(self, call_id: str | None) -> bool:
        """Whether a decision for ``call_id`` is held until the call waits (``EarlyDecisions``):
        whatever ``status`` showed as waiting, a decision sent for it counts."""
        return self.early.holds(call_id, waiting=self.pending, decided=self.decisions)

    def held_decisions(self) -> list[HeldDecision]:
        return self.early.shown()

    def _judge(self, held: list[tuple[str, Any]]) -> None:
        for name, payload in held:
            self.on_signal(name, payload)

    def drop_held(self, call_id: str | None, why: str) -> None:
        """Held decisions that will never apply (``call_id``'s, or all): listed as ignored."""
        for name, payload in self.early.take(call_id):
            self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=why))

    def step_began(self) -> None:
        self.early.step_began()

    def step_taken(self, calls: list[CallRequest]) -> None:
        """A step was taken in: its calls that ask a person are expected; decisions held for
        calls it did not ask for are judged now (and refused)."""
        self._judge(self.early.step_taken(c.call_id for c in calls if c.requires_approval))

    def close(self, why: str) -> None:
        """The run ends or continues as new: held decisions can no longer apply."""
        for name, payload in self.early.close():
            self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=why))

    async def hold_update(self, decision: Decision) -> None:
        """An Update ``decide`` for a call that does not wait yet (see ``_holds``): wait here until
        it does (then it is judged as any decision), or until it never will."""
        call_id = decision.call_id
        if not self._holds(call_id):
            return
        await workflow.wait_condition(lambda: not self._holds(call_id))
        # Waiting now, or never: ``decide`` judges it as any decision (and refuses the latter).

    def _already(self, call_id: str | None) -> str | None:
        """Why a decision for a decided call is refused, said plainly (the person may not know
        someone else was first)."""
        done = self.decisions.get(call_id) if call_id is not None else None
        if done is None:
            return None
        return f"call {call_id} was already {done.decision}" + (f" by {done.by}" if done.by else "")

    def decide(self, decision: Decision) -> ApprovalRecord:
        try:  # (again: a held decision was checked against its call only now)
            self.validate_decide(decision)
            call_id = self._decide_target(decision)
        except ValueError as err:
            why = self._already(decision.call_id) or str(err)
            raise ApplicationError(why, type="DecisionRefused", non_retryable=True) from None
        # Edited arguments are approved (and signed) as the whole set the call runs with.
        edited = self._edited(call_id, decision.arguments) if decision.arguments is not None else None
        offer = _offer(decision, edited)
        reason = self._refusal(call_id, offer)
        if reason is not None:  # recorded (an attempt to decide unsigned is worth seeing), and refused
            self._ignore(
                IgnoredSignal(signal="decide", payload=_shown(decision.model_dump(mode="json")), reason=reason)
            )
            raise ApplicationError(reason, type="DecisionRefused", non_retryable=True)
        record = ApprovalRecord(
            decision=_word(offer),
            by=decision.by,
            comment=decision.comment,
            asked_arguments=self.pending[call_id].arguments,
            door=decision.door,
        )
        returns_schema = self.pending[call_id].returns_schema
        if decision.approve and decision.answer is not None:
            record.answered = True
        elif decision.approve and edited is not None:
            record.approved_arguments = edited
        record = self._apply(call_id, offer, record)
        if record.answered and record.decision == "approved":  # decided (not only counted)
            # As the tool returns it (0 -> 0.0 for a float): the code sees the tool's type.
            value = decision.answer.value if decision.answer is not None else None
            self.answers[call_id] = conform_answer(returns_schema, value)
        return record

    def validate_decide(self, decision: Decision) -> None:
        """Refuse (before anything is recorded) a decision that cannot be applied: no such
        call, nobody named, edited arguments or an answer that do not fit the tool. A decision
        the approvers file refuses is accepted, then listed as ignored with why and failed
        (``decide``): the history keeps the attempt, the caller gets the reason. A decision for
        a call that does not wait yet is accepted and waits for it (``hold_update``)."""
        if self._holds(decision.call_id):
            if decision.call_id == CODE_APPROVAL_ID and (decision.arguments is not None or decision.answer is not None):
                raise ValueError("the code's review is approved or denied as it is")
            if not decision.by.strip() and decision.signature is None:
                raise ValueError("say who decides: by must not be empty")
            return  # checked against the call when it waits
        call_id = self._decide_target(decision)
        if not decision.by.strip() and decision.signature is None:
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

    def _ignore(self, ignored: IgnoredSignal) -> None:
        workflow.logger.warning("%s ignored: %s", ignored.signal, ignored.reason)
        self.ignored = [*self.ignored, ignored][-MAX_IGNORED:]

    def _refusal(self, call_id: str, offer: Offer) -> str | None:
        tally = self.tallies.get(call_id)
        if tally is None:
            return None
        # cryptography raises InvalidSignature from Rust, which imports it at that moment:
        # through the sandbox's importer that import fails (and the Rust side aborts).
        with workflow.unsafe.imports_passed_through():
            return tally.refusal(offer)

    def _apply(self, call_id: str, offer: Offer, record: ApprovalRecord) -> ApprovalRecord:
        """Record a decision that counts. Under an approvers file the verified approvers are
        who decided, and a call that needs more of them keeps waiting (``counted``)."""
        tally = self.tallies.get(call_id)
        if tally is not None and tally.gate.configured:
            deciding = tally.add(offer)
            gate = tally.gate
            record.rule, record.approvers_file = gate.rule, gate.file_sha256
            if deciding is None:
                record.decision, record.signatures = "counted", [s for s in _all(tally)]
                record.by = ", ".join(tally.approvers())
                record.needed = gate.required - len(tally.approvers())
                self.show_pending(workflow.info().workflow_id)
                return record
            record.signatures, record.by = deciding, ", ".join(s.approver for s in deciding)
        self.decisions[call_id] = record
        return record

    async def consult(self, review: PendingApproval) -> ApprovalRecord | None:
        """Ask the worker's approvers file about ``review`` (once; the history keeps the
        answer): the policy's decision when a rule decides without a person, else None."""
        if not self.versions.has(APPROVERS_PATCH):
            return None
        execution_id = workflow.info().workflow_id
        gate = await workflow.execute_activity(
            names.APPROVAL_GATE,
            GateInput(
                execution_id=execution_id,
                call_id=review.call_id,
                tool=review.tool,
                args=review.args,
                kwargs=review.kwargs,
            ),
            result_type=ApprovalGate,
            start_to_close_timeout=GATE_TIMEOUT,
            summary=f"who may decide call {review.call_id} ({review.tool})",
        )
        review.notify = gate.notify
        if not gate.configured:
            return None
        self.tallies[review.call_id] = CallTally(
            execution_id=gate.execution_id or execution_id,
            call_id=review.call_id,
            args=review.args,
            kwargs=review.kwargs,
            gate=gate,
            asked_at=workflow.now(),
            starter=self.starter,
        )
        if gate.verdict == "ask":
            return None
        self.early.settled(review.call_id)
        self.drop_held(review.call_id, f"call {review.call_id} was decided by rule {gate.policy_rule} before it waited")
        return ApprovalRecord(
            decision="approved" if gate.verdict == "allow" else "denied",
            by=gate.policy_rule,
            comment=gate.policy_reason or None,
            rule=gate.policy_rule,
            approvers_file=gate.file_sha256,
            asked_arguments=review.arguments,
            door="policy",
        )

    def undecided(self) -> list[str]:
        return [c for c in self.pending if c not in self.decisions]

    def waiting_calls(self) -> list[PendingApproval]:
        """The calls waiting for a person, in the documented order (``call_order``): the order
        they began to wait in depends on which gate answered first."""
        waiting = (p for p in self.pending.values() if p.call_id not in self.decisions)
        return sorted(waiting, key=lambda p: call_order(p.call_id))

    async def review_call(
        self, call: CallRequest, timeout: timedelta, park: Callable[[], Awaitable[None]]
    ) -> ApprovalRecord:
        """The decision on ``call``: the approvers file's policy when a rule decides (nothing
        parked, no person asked); else ``park`` the sandbox and wait until a person decides
        (or ``timeout`` passes)."""
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
        self.early.expect(review.call_id)
        decided = await self.consult(review)  # a policy rule may decide
        if decided is not None:
            return decided
        await park()
        return await self.wait_for(review, timeout)

    async def review_code(self, code: str, timeout: timedelta) -> ApprovalRecord:
        """The decision on running ``code`` at all (``require_code_approval``)."""
        review = PendingApproval(call_id=CODE_APPROVAL_ID, tool="<code>", args=[code], summary="run this code")
        self.early.expect(review.call_id)
        return await self.consult(review) or await self.wait_for(review, timeout)

    async def wait_for(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord:
        """Park until a person decides ``review`` (or ``timeout`` passes): the decision."""
        execution_id = workflow.info().workflow_id
        review.asked_at = workflow.now()
        review.deadline = review.asked_at + timeout
        self.pending[review.call_id] = review
        review.signed = review.call_id in self.tallies
        self._judge(self.early.take(review.call_id))  # held for it (a run of this generation)
        if review.call_id in self.decisions:  # decided as it began to wait: nobody is asked
            decision = self.decisions[review.call_id]
        else:
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
            except TimeoutError:
                decision = ApprovalRecord(
                    decision="timed_out", comment=f"no decision within {timeout}", asked_arguments=review.arguments
                )
        # Not in a finally: on eviction the coroutine is closed and must not touch workflow APIs.
        del self.pending[review.call_id]
        self.early.settled(review.call_id)
        self.tallies.pop(review.call_id, None)
        expired = decision.decision == "timed_out"
        self.notices.send("approval.expired" if expired else "approval.decided", review, decision)
        self.show_pending(execution_id)
        if not self.pending:
            self._set_state("running")
            verb = {"approved": "Approved", "denied": "Denied", "timed_out": "No decision in time for"}[
                decision.decision
            ]
            by = f" by {decision.by}" if decision.by and decision.decision != "timed_out" else ""
            if decision.signatures:
                by += f" (signature verified; rule {decision.rule})"
            workflow.set_current_details(f"{verb} `{summary(review)}`{by}; running on")
        return decision

    def show_pending(self, execution_id: str) -> None:
        """What waits for a person, where anyone can see it without a worker: the memo
        (UI "Memo", ``temporal workflow describe``) and the current details."""
        pending = self.waiting_calls()
        if not pending:
            workflow.upsert_memo({"pending_approvals": None})
            return
        entries = [self._memo_entry(execution_id, p) for p in pending]
        workflow.upsert_memo({"pending_approvals": entries})
        lines = [f"**Awaiting approval** ({len(pending)} call{'s' if len(pending) != 1 else ''}):", ""]
        signed = False
        for p in pending:
            tally = self.tallies.get(p.call_id)
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

    def _memo_entry(self, execution_id: str, p: PendingApproval) -> dict[str, Any]:
        tally = self.tallies.get(p.call_id)
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


def _offer(decision: Decision, edited: dict[str, Any] | None) -> Offer:
    answered = decision.answer is not None
    return Offer(
        kind="answer" if answered else "approve" if decision.approve else "deny",
        signature=decision.signature,
        edited=edited,
        answer=decision.answer.value if decision.answer is not None else None,
        answered=answered,
    )


def _word(offer: Offer) -> Literal["approved", "denied"]:
    return "denied" if offer.kind == "deny" else "approved"


def _all(tally: CallTally) -> list[DecisionSignature]:
    return [s for sigs in tally.counted.values() for s in sigs]


def _shown(value: Any, limit: int = 200) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


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
