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
    from codemode.activities.undo_records import UNDO_CALL_PREFIX
    from codemode.approvals.decision_checks import approved_arguments, check_answer, conform_answer
    from codemode.approvals.gate import ApprovalGate, GateInput
    from codemode.approvals.signing import DecisionSignature
    from codemode.approvals.tally import CallTally, Offer
    from codemode.workflows.approval_checks import Checks, Queued, recheck_timeout, refused_by_approvers
    from codemode.workflows.approval_memo import MEMO_UNDO_SHOWN, show_pending, summary  # noqa: F401 (re-exported)
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
    from codemode.workflows.versions import GENERATION_45, Versions
    from codemode.workflows.waiting_words import decided_details, timer_summary

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
        #: Runs of generation-45: the approvers file pinned, decisions judged again as they
        #: arrive (``workflows/approval_checks.py``).
        self.checks = Checks()
        #: The first run id of the chain: a version 2 signature names it.
        self.run_id = ""
        #: Undo (issue 47; set by the run): the state after a wait (``rolling_back`` while a
        #: compensation waited), what a "deny and roll back" asks of the run (None: it cannot),
        #: what it would compensate now, and why calls of the code no longer wait (the run rolls back).
        self.after_wait: ExecutionState = "running"
        self.on_rollback: Callable[[str, ApprovalRecord], None] | None = None
        self.undo_preview: Callable[[], list[str]] = list
        self.withdrawing: str | None = None

    @property
    def strict(self) -> bool:
        """Whether the run takes issue 45's rules (``approvals/tally.py``'s ``strict``)."""
        return self.versions.since(GENERATION_45)

    def begin(self, req: CodeExecutionRequest) -> None:
        """The run's code (for notices) and who started it (for four-eyes rules)."""
        self.notices.code = req.code
        self.starter = req.started_by
        self.run_id = workflow.info().first_execution_run_id
        if self.strict:
            self.checks.begin(req)

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
        rollback = payload.get("rollback") if isinstance(payload, dict) else None
        if rollback not in (None, False):
            why = self._no_rollback(call_id, approve=name == "approve") if rollback is True else "rollback must be true or false"
            if why is not None:
                self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=why))
                return
        offer = Offer(kind="approve" if name == "approve" else "deny", signature=signature, rollback=rollback is True)
        door = "signal"
        if self.strict:  # a version 2 signature says the door it was made for (and covers the comment)
            offer.comment, offer.door = text, signature.door if signature is not None else None
            door = offer.door or "signal"
        reason = self._refusal(call_id, offer)
        if reason is not None:
            self._ignore(IgnoredSignal(signal=name, payload=_shown(payload), reason=reason))
            return
        asked = self.pending[call_id].arguments
        record = ApprovalRecord(decision=_word(offer), by=by, comment=text, asked_arguments=asked, door=door)
        record.rollback = offer.rollback
        if self._queues(call_id):
            self.checks.queued.setdefault(call_id, []).append(Queued(call_id, offer, record, "signal", name, by=by))
            return
        self._apply(call_id, offer, record)

    def _queues(self, call_id: str) -> bool:
        """Whether a decision for ``call_id`` is judged again before it counts (generation-45,
        a call under an approvers file)."""
        tally = self.tallies.get(call_id)
        return self.strict and tally is not None and tally.gate.configured

    def _no_rollback(self, call_id: str, *, approve: bool) -> str | None:
        """Why "deny and roll back" cannot apply to ``call_id`` (None: it can)."""
        if approve:
            return "rollback goes with a denial (deny and roll back), not an approval"
        if self.on_rollback is None:
            return "this run cannot roll back: it started before undo existed (deny it, then undo by hand)"
        if call_id == CODE_APPROVAL_ID or call_id.startswith(UNDO_CALL_PREFIX):
            return f"call {call_id} is not a call of the code: deny it (nothing of it ran to roll back)"
        return None

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
        self.close_queued(why)

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

    async def decide_update(self, decision: Decision) -> ApprovalRecord:
        """The ``decide`` Update: the record at once, or (generation-45, a call under an
        approvers file) once the run judged the decision again (``approval_checks.py``)."""
        outcome = self.decide(decision)
        if isinstance(outcome, ApprovalRecord):
            return outcome
        await workflow.wait_condition(lambda: outcome.judged)
        if outcome.refused is not None:
            raise ApplicationError(outcome.refused, type="DecisionRefused", non_retryable=True)
        return outcome.record

    def decide(self, decision: Decision) -> ApprovalRecord | Queued:
        try:  # (again: a held decision was checked against its call only now)
            self.validate_decide(decision)
            call_id = self._decide_target(decision)
        except ValueError as err:
            why = self._already(decision.call_id) or str(err)
            raise ApplicationError(why, type="DecisionRefused", non_retryable=True) from None
        # Edited arguments are approved (and signed) as the whole set the call runs with.
        edited = self._edited(call_id, decision.arguments) if decision.arguments is not None else None
        offer = _offer(decision, edited)
        if self.strict:
            offer.comment, offer.door = decision.comment, decision.door
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
        record.rollback = decision.rollback
        if self._queues(call_id):
            info = workflow.current_update_info()
            queued = Queued(
                call_id,
                offer,
                record,
                "update",
                "decide",
                by=decision.by,
                update_id=info.id if info is not None else None,
                answer=decision.answer.value if decision.answer is not None else None,
            )
            self.checks.queued.setdefault(call_id, []).append(queued)
            return queued
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
        if decision.rollback:
            why = self._no_rollback(call_id, approve=decision.approve)
            if why is not None:
                raise ValueError(why)
        if call_id.startswith(UNDO_CALL_PREFIX) and (decision.arguments is not None or decision.answer is not None):
            raise ValueError("a compensation is approved or denied as it is")
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

    def _refusal(self, call_id: str, offer: Offer, now: Any = None) -> str | None:
        tally = self.tallies.get(call_id)
        if tally is None:
            return None
        # cryptography raises InvalidSignature from Rust, which imports it at that moment:
        # through the sandbox's importer that import fails (and the Rust side aborts).
        with workflow.unsafe.imports_passed_through():
            return tally.refusal(offer, now=now)

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
                record.needed = tally.needed() - len(tally.approvers())
                self.show_pending(workflow.info().workflow_id)
                return record
            record.signatures, record.by = deciding, ", ".join(s.approver for s in deciding)
        self.decisions[call_id] = record
        if record.rollback and record.decision == "denied" and self.on_rollback is not None:
            self.on_rollback(call_id, record)  # the run stops and compensates what it applied
        return record

    async def consult(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord | None:
        """Ask the worker's approvers file about ``review`` (once; the history keeps the
        answer): the policy's decision when a rule decides without a person, else None."""
        if not self.versions.has(APPROVERS_PATCH):
            return None
        execution_id = workflow.info().workflow_id
        if self.strict:
            asked = await self.checks.ask(review, timeout)
            if isinstance(asked, str):  # no gate the run may take: refused
                self.early.settled(review.call_id)
                self.drop_held(review.call_id, f"call {review.call_id} was refused before it waited: {asked}")
                return refused_by_approvers(review, asked)
            gate = asked
        else:
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
        review.inbox_url, review.tool_doc = gate.inbox_url or None, gate.tool_doc or None
        if not gate.configured:
            return None
        self.tallies[review.call_id] = CallTally(
            execution_id=gate.execution_id or execution_id,
            call_id=review.call_id,
            args=review.args,
            kwargs=review.kwargs,
            gate=gate,
            asked_at=(gate.checked_at or workflow.now()) if self.strict else workflow.now(),
            starter=self.starter,
            strict=self.strict,
            run_id=self.run_id if self.strict else None,
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
            run_id=self.run_id,
        )
        if self.on_rollback is not None and not call.call_id.startswith(UNDO_CALL_PREFIX):
            review.can_undo = call.undo is not None
            review.undo_label = call.undo.label if call.undo is not None else None
        self.early.expect(review.call_id)
        decided = await self.consult(review, timeout)  # a policy rule may decide
        if decided is not None:
            return decided
        await park()
        return await self.wait_for(review, timeout)

    async def review_code(self, code: str, timeout: timedelta) -> ApprovalRecord:
        """The decision on running ``code`` at all (``require_code_approval``)."""
        review = PendingApproval(
            call_id=CODE_APPROVAL_ID, tool="<code>", args=[code], summary="run this code", run_id=self.run_id
        )
        self.early.expect(review.call_id)
        return await self.consult(review, timeout) or await self.wait_for(review, timeout)

    async def wait_for(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord:
        """Park until a person decides ``review`` (or ``timeout`` passes): the decision."""
        execution_id = workflow.info().workflow_id
        review.asked_at = workflow.now()
        review.deadline = review.asked_at + timeout
        self.pending[review.call_id] = review
        review.signed = review.call_id in self.tallies
        self._judge(self.early.take(review.call_id))  # held for it (a run of this generation)
        if self.withdrawing is not None and not review.call_id.startswith(UNDO_CALL_PREFIX):
            self.decisions.setdefault(review.call_id, self._withdrawn(review))
        if review.call_id in self.decisions:  # decided as it began to wait: nobody is asked
            decision = self.decisions[review.call_id]
        else:
            self._set_state("awaiting_approval")
            if review.can_undo is not None:  # what people see before they decide (issue 47)
                review.would_compensate = self.undo_preview()[:MEMO_UNDO_SHOWN]
            self.show_pending(execution_id)
            self.notices.send("approval.requested", review)
            if self._queues(review.call_id):
                decision = await self._wait_judging(review, timeout)
            else:
                try:
                    await workflow.wait_condition(
                        lambda: review.call_id in self.decisions,
                        timeout=timeout,
                        timeout_summary=timer_summary(review),
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
            self._set_state(self.after_wait)
            verb = {
                "approved": "Approved",
                "denied": "Denied",
                "timed_out": "No decision in time for",
                "withdrawn": "Withdrawn (the run rolls back):",
            }[decision.decision]
            by = f" by {decision.by}" if decision.by and decision.decision != "timed_out" else ""
            if decision.signatures:
                by += f" (signature verified; rule {decision.rule})"
            workflow.set_current_details(decided_details(verb, review, by))
        return decision

    async def _wait_judging(self, review: PendingApproval, timeout: timedelta) -> ApprovalRecord:
        """Generation-45, a call under an approvers file: wait until a person decides, judging
        each batch of decisions that arrive against the file as it is then
        (``approval_checks.py``), or until ``timeout`` passes."""
        call_id = review.call_id
        assert review.deadline is not None
        while call_id not in self.decisions:
            if self.checks.queued.get(call_id):
                await self._judge_again(review, self.checks.queued.pop(call_id))
                continue
            left = review.deadline - workflow.now()
            if left <= timedelta(0):
                break
            try:
                await workflow.wait_condition(
                    lambda: call_id in self.decisions or bool(self.checks.queued.get(call_id)),
                    timeout=left,
                    timeout_summary=timer_summary(review),
                )
            except TimeoutError:
                break
        if call_id in self.decisions:
            return self.decisions[call_id]
        for queued in self.checks.queued.pop(call_id, []):
            self._refuse_queued(queued, f"the time of call {call_id} ran out before the decision was judged")
        return ApprovalRecord(decision="timed_out", comment=f"no decision within {timeout}", asked_arguments=review.arguments)

    async def _judge_again(self, review: PendingApproval, batch: list[Queued]) -> None:
        """Judge ``batch`` against the file as a worker reads it now: counted, deciding, or
        refused (listed as ignored; an Update fails with why)."""
        call_id = review.call_id
        tally = self.tallies[call_id]
        assert review.deadline is not None
        fresh = await self.checks.ask(review, recheck_timeout(review.deadline - workflow.now()), batch)
        if isinstance(fresh, str):
            for queued in batch:
                self._refuse_queued(queued, f"not judged: {fresh}")
            return
        tally.fresh = fresh
        for sig, why in tally.revoked():
            shown = _shown({"call_id": call_id, "by": sig.approver})
            self._ignore(IgnoredSignal(signal="approve", payload=shown, reason=f"no longer counts: {why}"))
        for queued in batch:
            if call_id in self.decisions:
                self._refuse_queued(queued, self._already(call_id) or "the call was decided")
                continue
            reason = self._refusal(call_id, queued.offer, fresh.checked_at)
            if reason is not None:
                self._refuse_queued(queued, reason)
                continue
            record = self._apply(call_id, queued.offer, queued.record)
            if record.answered and record.decision == "approved":
                self.answers[call_id] = conform_answer(self.pending[call_id].returns_schema, queued.answer)
            queued.record, queued.judged = record, True
        if call_id not in self.decisions:
            self.show_pending(workflow.info().workflow_id)

    def _refuse_queued(self, queued: Queued, why: str) -> None:
        payload = _shown({"call_id": queued.call_id, "by": queued.by})
        self._ignore(IgnoredSignal(signal=queued.name, payload=payload, reason=why))
        queued.refused, queued.judged = why, True

    def close_queued(self, why: str) -> None:
        """The run ends: decisions still waiting to be judged never count (an Update says why)."""
        for batch in self.checks.queued.values():
            for queued in batch:
                self._refuse_queued(queued, why)
        self.checks.queued.clear()

    def withdraw(self, why: str) -> None:
        """The run rolls back (issue 47): every call of the code waiting now is withdrawn (nobody
        decided it), and none waits from now on; compensations still wait for their people."""
        self.withdrawing = why
        for p in list(self.pending.values()):
            if p.call_id not in self.decisions and not p.call_id.startswith(UNDO_CALL_PREFIX):
                self.decisions[p.call_id] = self._withdrawn(p)

    def _withdrawn(self, p: PendingApproval) -> ApprovalRecord:
        return ApprovalRecord(decision="withdrawn", comment=self.withdrawing, asked_arguments=p.arguments, door="rollback")

    def show_pending(self, execution_id: str) -> None:
        """What waits for a person, where anyone can see it without a worker: the memo
        (UI "Memo", ``temporal workflow describe``) and the current details."""
        show_pending(
            execution_id, self.waiting_calls(), self.tallies, self.starter, self.notices.code, self._undo_preview_now()
        )

    def _undo_preview_now(self) -> list[str] | None:
        """What "deny and roll back" would compensate now (None: the run cannot roll back)."""
        return self.undo_preview() if self.on_rollback is not None else None


def _offer(decision: Decision, edited: dict[str, Any] | None) -> Offer:
    answered = decision.answer is not None
    return Offer(
        kind="answer" if answered else "approve" if decision.approve else "deny",
        signature=decision.signature,
        edited=edited,
        answer=decision.answer.value if decision.answer is not None else None,
        answered=answered,
        rollback=decision.rollback,
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




def permission_error(what: str, decision: ApprovalRecord) -> ErrorInfo:
    if decision.decision == "denied":
        by = f" by {decision.by}" if decision.by else ""
        why = f": {decision.comment}" if decision.comment else ""
        return ErrorInfo(type="PermissionError", message=f"{what} was denied{by}{why}", kind="denied")
    if decision.decision == "withdrawn":
        why = f": {decision.comment}" if decision.comment else ""
        return ErrorInfo(type="PermissionError", message=f"{what} was withdrawn{why}", kind="denied")
    return ErrorInfo(type="PermissionError", message=f"{what} was not approved in time", kind="denied")
