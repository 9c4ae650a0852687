"""The audit of one execution, read from its Temporal workflow history (not from a query).

The history is the record nobody can edit after the fact: the request that started the
run, every sandbox step (a local-activity marker or an activity), every tool activity with
its arguments, final attempt number and result or failure, every approval signal with the
approver's name, and the outcome. ``build_audit`` folds those events into one
``ExecutionAudit``; it needs no worker, so it also works for a run whose worker is gone.

An execution may span several runs (continue-as-new keeps each history small):
``fetch_audit`` follows the chain from the first run to the latest and folds them in order.
Payloads are decoded through the client's full data converter, so values kept in the object
store (external-storage references) are fetched and shown like inline ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import DataConverter

from codemode.activities import names
from codemode.activities.models import ParkResult, StepResult, ToolInput, ToolOutput
from codemode.client.histories.decisions import ApprovalAudit, approval_words  # noqa: F401 (re-exported)
from codemode.client.histories.decode import PayloadDecoder, _as, _time, tool_error  # noqa: F401 (re-exported)
from codemode.client.histories.parking import park_text, release_text
from codemode.client.histories.signed_decisions import SignedDecisions
from codemode.client.histories.held_decisions import HeldDecisions
from codemode.client.histories.models import AuditEvent, CallAudit, ExecutionAudit, StepAudit  # noqa: F401 (re-exported)
from codemode.workflows.models import (
    CODE_APPROVAL_ID,
    CodeExecutionRequest,
    Decision,
    ErrorInfo,
    ExecutionOutcome,
    IgnoredSignal,
    decision_target,
    read_decision,
)

#: Activity types that are sandbox steps; every other activity type is a tool.
STEP_TYPES = names.SANDBOX_STEPS
LOCAL_ACTIVITY_MARKER = "core_local_activity"


# -- folding ------------------------------------------------------------------------------------


class _Builder:
    def __init__(self, execution_id: str, decode: PayloadDecoder) -> None:
        self.audit = ExecutionAudit(execution_id=execution_id)
        self.decode = decode
        self.calls: dict[str, CallAudit] = {}
        #: (run, scheduled_event_id) -> (activity type, call id or None for a step)
        self.activities: dict[tuple[int, int], tuple[str, str | None]] = {}
        #: (run, scheduled_event_id) -> attempt, for sandbox steps run as regular activities
        self.step_attempts: dict[tuple[int, int], int] = {}
        #: Index of the run being folded (event ids restart in every run).
        self.run = 0
        #: (run, scheduled_event_id) -> summary of a sandbox_release activity (pause or free)
        self.releases: dict[tuple[int, int], str] = {}
        self.signed = SignedDecisions()
        #: Decisions that came before their call waited (runs of the current generation).
        self.held = HeldDecisions(lambda c: self.calls[c].status if c in self.calls else None)

    def event(self, at: datetime, kind: Any, text: str, call_id: str | None = None) -> None:
        self.audit.events.append(AuditEvent(at=at, kind=kind, call_id=call_id, text=text))

    def call(self, call_id: str, tool: str = "?") -> CallAudit:
        if call_id not in self.calls:
            self.calls[call_id] = CallAudit(call_id=call_id, tool=tool)
        return self.calls[call_id]

    def step(
        self, at: datetime, name: str, *, local: bool, attempt: int, result: Any, after: str | None = None
    ) -> StepResult | None:
        step = _as(StepResult, result)
        audit = StepAudit(name=name, local=local, at=at, attempt=attempt, after=after)
        if step is not None:
            audit.kind, audit.via, audit.error, audit.fallback = step.kind, step.via, step.error, step.fallback
            audit.deferred = bool(step.deferred)
            audit.network_cut = step.network_cut
        self.audit.steps.append(audit)
        what = {"calls": "paused at a tool call", "result": "finished the code", "error": "stopped on an error"}
        how = _VIA.get(audit.via, "")
        if audit.fallback:
            how = f"{how} because {audit.fallback}" if how else audit.fallback
        where = f" (in {after}'s activity)" if after else " (local)" if local else ""
        text = f"{name}{where}: {what.get(audit.kind, 'ran')}" + (f" [{how}]" if how else "")
        if audit.deferred:
            text += " (checkpoint deferred: kept live on its worker)"
        if audit.network_cut:
            self.event(
                at, "step", f"{name}: cut the sandbox's network for good before the code saw it: {audit.network_cut}"
            )
        self.event(at, "step", text)
        if step is not None:
            self.audit.stdout += step.stdout
            for req in step.calls:
                c = self.call(req.call_id, req.tool)
                c.tool, c.args, c.kwargs, c.summary, c.line = req.tool, req.args, req.kwargs, req.summary, req.line
                c.requires_approval, c.requested_at, c.arguments = req.requires_approval, at, req.arguments
                if req.requires_approval and c.approval is None:
                    c.status = "awaiting_approval"
                    self.event(at, "requested", f"{req.summary} needs approval", req.call_id)
            for entry in step.rejected:
                c = self.call(entry.call_id, entry.function_name)
                c.args, c.kwargs, c.requested_at, c.status = entry.args, entry.kwargs, at, "error"
                c.summary = c.summary or entry.describe()
                c.error = ErrorInfo(type=entry.error_type or "Error", message=entry.error_message, kind="invalid_call")
                self.event(
                    at, "call", f"{c.summary} rejected before running: {c.error.type}: {c.error.message}", c.call_id
                )
            for entry in step.served:  # save_artifact: the step stored the file and answered
                c = self.call(entry.call_id, entry.function_name)
                c.args, c.kwargs, c.requested_at, c.finished_at = entry.args, entry.kwargs, at, at
                c.summary = c.summary or entry.describe()
                if entry.error_type is None:
                    c.status, c.result = "ok", entry.result
                    self.event(at, "call", f"{c.summary} saved by the step", c.call_id)
                else:
                    c.status = "error"
                    c.error = ErrorInfo(type=entry.error_type, message=entry.error_message, kind="resource")
                    self.event(at, "call", f"{c.summary} refused: {c.error.type}: {c.error.message}", c.call_id)
        return step

    async def _stepped(self, step: StepResult | None) -> None:
        """A step was taken in: decisions held for calls it did not ask for are judged again."""
        for e in self.held.step_taken(step.calls if step is not None else []):
            await self.feed(e)

    async def feed(self, e: HistoryEvent) -> None:
        at = _time(e)
        kind = e.WhichOneof("attributes")
        a = self.audit
        decode = self.decode
        if kind == "workflow_execution_started_event_attributes":
            attrs = e.workflow_execution_started_event_attributes
            if attrs.continued_execution_run_id:  # a later run of the chain: its input is the carry
                self.event(at, "continued", f"continued as new: run {self.run + 1} ({attrs.original_execution_run_id})")
                return
            req = _as(CodeExecutionRequest, await decode(attrs.input, CodeExecutionRequest))
            a.started_at, a.started_by, a.run_id = at, attrs.identity, attrs.original_execution_run_id
            self.signed.starter = req.started_by if req is not None else None
            if req is not None:
                a.runtime, a.code, a.require_code_approval = req.runtime, req.code, req.require_code_approval
                self.held.reviewing_code(req.require_code_approval)
            lines = len(a.code.splitlines())
            self.event(
                at,
                "started",
                f"execution started ({a.runtime or '?'}, {lines} line{'s' if lines != 1 else ''} of code) "
                f"by {attrs.identity}",
            )
        elif kind == "marker_recorded_event_attributes":
            attrs = e.marker_recorded_event_attributes
            if attrs.marker_name != LOCAL_ACTIVITY_MARKER:
                self.held.saw_marker(e)
                return
            data = await decode(attrs.details["data"]) if "data" in attrs.details else {}
            if not isinstance(data, dict):
                data = {}
            name = (data or {}).get("activity_type", "local activity")
            if attrs.HasField("failure"):
                failure = await decode.failure(attrs.failure)
                self.audit.steps.append(
                    StepAudit(name=name, local=True, at=at, error=tool_error(failure), kind="error")
                )
                self.event(at, "step", f"{name} (local) failed: {failure.message}")
                return
            if name == names.SANDBOX_RELEASE:
                self.event(at, "step", "sandbox_release (local): released what the sandbox held")
                return
            if name == names.SANDBOX_SAVE_STATE:
                self.event(at, "step", "stored this run's journal and call records for the next run")
                return
            if name == names.SANDBOX_LOAD_STATE:
                return  # the outcome reading back earlier runs' call records (the audit has them)
            if name == names.NOTIFY_START:  # telling people a call waits is not a sandbox step
                told = await decode(attrs.details["result"], str) if "result" in attrs.details else None
                if told == "started":
                    self.event(at, "approval", "notified the notify config's channels")
                return
            result = await decode(attrs.details["result"], StepResult) if "result" in attrs.details else None
            await self._stepped(self.step(at, name, local=True, attempt=int((data or {}).get("attempt", 1)), result=result))
        elif kind == "activity_task_scheduled_event_attributes":
            attrs = e.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name
            if name in names.NOT_TOOLS:
                self.activities[(self.run, e.event_id)] = (name, None)
                if name == names.APPROVAL_GATE:
                    self.signed.scheduled(self.run, e.event_id, await decode(attrs.input))
                if name == names.SANDBOX_RELEASE and e.user_metadata.HasField("summary"):
                    summary = await decode([e.user_metadata.summary], str)
                    self.releases[(self.run, e.event_id)] = summary if isinstance(summary, str) else ""
                return
            inp = _as(ToolInput, await decode(attrs.input, ToolInput))
            call_id = inp.call_id if inp else attrs.activity_id.removeprefix("call-")
            c = self.call(call_id, name)
            c.tool, c.scheduled_at, c.status = name, at, "running"
            if inp is not None:
                c.args, c.kwargs = inp.args, inp.kwargs
                if inp.then is not None:  # this call's activity runs the next step too
                    self.held.fused.add(call_id)
            if e.user_metadata.HasField("summary"):
                summary = await decode([e.user_metadata.summary], str)
                c.summary = summary if isinstance(summary, str) and summary else c.summary
            c.summary = c.summary or f"{name}(...)"
            self.activities[(self.run, e.event_id)] = (name, call_id)
        elif kind == "activity_task_started_event_attributes":
            attrs = e.activity_task_started_event_attributes
            name, call_id = self.activities.get((self.run, attrs.scheduled_event_id), ("?", None))
            if call_id is not None:
                c = self.call(call_id, name)
                c.attempts = attrs.attempt
                if attrs.HasField("last_failure"):
                    c.retried_after = tool_error(await decode.failure(attrs.last_failure))
            else:
                self.step_attempts[(self.run, attrs.scheduled_event_id)] = attrs.attempt
        elif kind == "activity_task_completed_event_attributes":
            attrs = e.activity_task_completed_event_attributes
            name, call_id = self.activities.get((self.run, attrs.scheduled_event_id), ("?", None))
            if call_id is None:
                if name == names.APPROVAL_GATE:
                    await self._gate(at, attrs)
                elif name == names.NOTIFY_START:  # telling people a call waits is not a sandbox step
                    if await decode(attrs.result, str) == "started":
                        self.event(at, "approval", "notified the notify config's channels")
                elif name == names.SANDBOX_RELEASE:
                    what = self.releases.get((self.run, attrs.scheduled_event_id)) or "release"
                    self.event(at, "step", f"sandbox_release: {release_text(what, a.runtime)}")
                elif name == names.SANDBOX_PARK:
                    parked = _as(ParkResult, await decode(attrs.result, ParkResult))
                    self.event(at, "step", f"sandbox_park: {park_text(parked)}")
                elif name in STEP_TYPES:
                    attempt = self.step_attempts.get((self.run, attrs.scheduled_event_id), 1)
                    result = await decode(attrs.result, StepResult)
                    await self._stepped(self.step(at, name, local=False, attempt=attempt, result=result))
                return
            c = self.call(call_id, name)
            out = _as(ToolOutput, await decode(attrs.result, ToolOutput))
            c.status, c.finished_at = "ok", at
            c.result = out.result() if out else None
            c.attempts = out.attempt if out else c.attempts
            self.event(at, "call", _call_text(c), call_id)
            if out is not None and out.step is not None:
                await self._stepped(
                    self.step(at, names.SANDBOX_RESUME, local=False, attempt=1, result=out.step, after=name)
                )
            elif out is not None and out.unfused:
                self.event(at, "step", f"the step after {name} runs on its own: {out.unfused}")
        elif kind in ("activity_task_failed_event_attributes", "activity_task_timed_out_event_attributes"):
            attrs = getattr(e, kind)
            name, call_id = self.activities.get((self.run, attrs.scheduled_event_id), ("?", None))
            err = tool_error(await decode.failure(attrs.failure))
            if call_id is None:
                self.audit.steps.append(StepAudit(name=name, local=False, at=at, error=err, kind="error"))
                self.event(at, "step", f"{name} failed: {err.message}")
                return
            c = self.call(call_id, name)
            c.status, c.finished_at, c.error = "error", at, err
            self.event(at, "call", _call_text(c), call_id)
        elif kind == "workflow_execution_signaled_event_attributes":
            attrs = e.workflow_execution_signaled_event_attributes
            if attrs.signal_name not in ("approve", "deny"):
                return
            payload = await decode(attrs.input)
            if self._held(decision_target(payload), e):
                return
            read = read_decision(attrs.signal_name, payload, self.undecided())
            if isinstance(read, IgnoredSignal):
                a.ignored_signals.append(read)
                self.event(at, "approval", f"{attrs.signal_name} signal ignored: {read.reason} (input {read.payload})")
                return
            call_id, by, text = read
            decision = "approved" if attrs.signal_name == "approve" else "denied"
            signature = payload.get("signature") if isinstance(payload, dict) else None
            if (by := self._signed(at, attrs.signal_name, call_id, signature, None, by)) is None:
                return
            self._approval(
                ApprovalAudit(
                    call_id=call_id,
                    decision=decision,
                    by=by,
                    comment=text,
                    at=at,
                    identity=attrs.identity,
                    door="signal",
                )
            )
        elif kind == "workflow_execution_update_accepted_event_attributes":
            attrs = e.workflow_execution_update_accepted_event_attributes
            request = attrs.accepted_request
            if request.input.name != "decide":
                return
            d = _as(Decision, await decode(request.input.args, Decision))
            if d is None or self._held(d.call_id, e):
                return
            read = read_decision("decide", {"call_id": d.call_id, "by": d.by}, self.undecided())
            if isinstance(read, IgnoredSignal):
                return  # the validator refused it; a refused update leaves no event anyway
            asked = self.calls[read[0]].arguments if read[0] in self.calls else None
            approved = {**(asked or {}), **d.arguments} if d.approve and d.arguments else None
            if (by := self._signed(at, "decide", read[0], d.signature, d, d.by, approved)) is None:
                return
            self._approval(
                ApprovalAudit(
                    call_id=read[0],
                    decision="approved" if d.approve else "denied",
                    by=by,
                    comment=d.comment,
                    at=at,
                    identity=request.meta.identity,
                    door=d.door,
                    asked_arguments=asked,
                    approved_arguments=approved,
                    answered=d.approve and d.answer is not None,
                    answer=d.answer.value if d.approve and d.answer is not None else None,
                )
            )
        elif kind == "workflow_execution_completed_event_attributes":
            outcome = _as(
                ExecutionOutcome, await decode(e.workflow_execution_completed_event_attributes.result, ExecutionOutcome)
            )
            a.status, a.closed_at = "completed", at
            if outcome is not None:
                a.success, a.output, a.error, a.stdout = outcome.success, outcome.output, outcome.error, outcome.stdout
                a.usage = outcome.usage
                self._reconcile(outcome)
            if a.success:
                self.event(at, "completed", "execution completed: success")
            else:
                err = a.error
                self.event(
                    at,
                    "completed",
                    f"execution completed: {err.type}: {err.message}" if err else "execution completed: failed",
                )
        elif kind in _CLOSED:
            a.status, a.closed_at, a.success = _CLOSED[kind], at, False
            attrs = getattr(e, kind)
            has_failure = hasattr(attrs, "failure") and attrs.HasField("failure")
            message = (await decode.failure(attrs.failure)).message if has_failure else ""
            message = message or getattr(attrs, "reason", "") or a.status
            a.error = ErrorInfo(type="WorkflowError", message=message, kind="sandbox")
            self.event(at, "failed", f"execution {a.status}: {message}")

    async def _gate(self, at: datetime, attrs: Any) -> None:
        """A call's approval gate: a policy rule that decided, without a person; else the call
        begins to wait, and the decisions held for it apply (runs of the current generation)."""
        result = await self.decode(attrs.result)
        asked = self.signed.asked.get((self.run, attrs.scheduled_event_id))
        gate = self.signed.completed(self.audit.execution_id, self.run, attrs.scheduled_event_id, result, at)
        if asked is not None and (gate is None or gate.verdict == "ask"):
            for held in self.held.began_waiting(asked.call_id):
                await self.feed(held)
        elif asked is not None:
            self.held.settled(asked.call_id)
            self._drop_held(asked.call_id, f"call {asked.call_id} was decided by a rule before it waited")
        if gate is not None and gate.verdict != "ask":
            call_id = next(c for c, t in self.signed.tallies.items() if t.gate is gate)
            decision = "approved" if gate.verdict == "allow" else "denied"
            reason = gate.policy_reason or None
            self._approval(
                ApprovalAudit(
                    call_id=call_id, decision=decision, by=gate.policy_rule, comment=reason, at=at, door="policy"
                )
            )

    def _signed(
        self, at: datetime, name: str, call_id: str, signature: Any, decision: Any, by: str, edited: Any = None
    ) -> str | None:
        """Who decided, under an approvers file the verified approvers (None: not applied).
        ``edited``: the whole arguments an edited approval runs with (what its signature covers)."""
        kind = "approve" if name in ("approve", "decide") and (decision is None or decision.approve) else "deny"
        got = self.signed.offer(call_id, kind, signature, decision, edited)
        if got is None:
            return by
        word, text = got
        if word == "ignored":
            self.audit.ignored_signals.append(IgnoredSignal(signal=name, payload=str(call_id), reason=text))
            self.event(at, "approval", f"{name} for call {call_id} ignored: {text}", call_id)
            return None
        if word == "counted":
            self.event(at, "approval", f"call {call_id}: {text} so far", call_id)
            return None
        return f"{text} (signed)"

    def undecided(self) -> list[str]:
        """Calls waiting for a decision at this point of the history (in a run of the current
        generation, only once their wait began: their gate completed)."""
        waiting = [c.call_id for c in self.calls.values() if c.status == "awaiting_approval" and c.approval is None]
        a = self.audit
        if a.require_code_approval and a.code_approval is None and not a.steps:
            waiting.insert(0, CODE_APPROVAL_ID)
        if self.held.generation:
            waiting = [c for c in waiting if c in self.held.waiting]
        return waiting

    def _held(self, call_id: str | None, e: HistoryEvent) -> bool:
        """Keep a decision the workflow held (its call not waiting yet) until the call waits."""
        c = self.calls.get(call_id or "")
        code = call_id == CODE_APPROVAL_ID and self.audit.code_approval is not None
        return self.held.keep(call_id, e, decided=code or (c is not None and c.approval is not None))

    def _drop_held(self, call_id: str | None, why: str) -> None:
        self.audit.ignored_signals += self.held.dropped(call_id, why)

    def _approval(self, approval: ApprovalAudit) -> None:
        verb, by, why = approval_words(approval)
        door = f" (via {approval.door})" if approval.door else ""
        self.held.settled(approval.call_id)
        if approval.call_id == CODE_APPROVAL_ID:
            if self.audit.code_approval is None:
                self.audit.code_approval = approval
                self.event(approval.at, "approval", f"the code was {verb}{by}{why}{door}", CODE_APPROVAL_ID)
            return
        c = self.calls.get(approval.call_id)
        if c is None or c.approval is not None or c.status != "awaiting_approval":
            self.event(
                approval.at,
                "approval",
                f"{verb}{by} for call {approval.call_id}: ignored (not pending)",
                approval.call_id,
            )
            return
        c.approval = approval
        if approval.decision == "denied":
            c.status = "denied"
            c.error = ErrorInfo(type="PermissionError", message=f"{c.summary} was denied{by}{why}", kind="denied")
        else:
            c.status = "pending"
        self.event(approval.at, "approval", f"{c.summary} {verb}{by}{why}{door}", c.call_id)

    def _reconcile(self, outcome: ExecutionOutcome) -> None:
        """Calls the history shows no decision for (an approval that timed out) take the outcome's word."""
        for rec in outcome.tool_calls:
            c = self.calls.get(rec.call_id)
            if c is not None and c.status in ("awaiting_approval", "pending") and rec.status in ("timed_out", "denied"):
                c.status, c.error = rec.status, rec.error


_VIA = {
    "restored": "restored from its checkpoint",
    "live": "its live sandbox",
    "replayed": "replayed the journal",
}

_CLOSED = {
    "workflow_execution_failed_event_attributes": "failed",
    "workflow_execution_terminated_event_attributes": "terminated",
    "workflow_execution_canceled_event_attributes": "canceled",
    "workflow_execution_timed_out_event_attributes": "timed_out",
}


def _call_text(c: CallAudit) -> str:
    attempts = f", {c.attempts} attempts" if c.attempts > 1 else ""
    if c.status == "ok":
        return f"{c.summary} returned{attempts}"
    return f"{c.summary} failed{attempts}: {c.error.type}: {c.error.message}" if c.error else f"{c.summary} failed"


async def build_audit(
    execution_id: str, runs: Sequence[Iterable[HistoryEvent]], converter: DataConverter, run_ids: Sequence[str] = ()
) -> ExecutionAudit:
    """Fold the histories of an execution's runs (first to latest) into one audit."""
    builder = _Builder(execution_id, PayloadDecoder(converter))
    builder.audit.runs = list(run_ids)
    for index, events in enumerate(runs):
        builder.run = index
        for e in events:
            if e.WhichOneof("attributes") == "workflow_execution_continued_as_new_event_attributes":
                continue  # the next run's start says it
            await builder.feed(e)
    if builder.audit.status != "running":  # decisions held for calls that never waited
        builder._drop_held(None, "the run ended before the call waited for a decision")
    builder.audit.calls = list(builder.calls.values())
    return builder.audit


async def fetch_audit(client: Any, execution_id: str) -> ExecutionAudit:
    """The audit of an execution: every run of its continue-as-new chain, from the server's
    history, decoded with the client's data converter."""
    histories, run_ids = await fetch_runs(client, execution_id)
    return await build_audit(execution_id, histories, client.data_converter, run_ids)


async def fetch_runs(client: Any, execution_id: str) -> tuple[list[Sequence[HistoryEvent]], list[str]]:
    """The events of every run of the execution's continue-as-new chain (first to latest), and the run ids."""
    histories: list[Sequence[HistoryEvent]] = []
    run_ids: list[str] = []
    run_id: str | None = None
    while True:
        history = await client.get_workflow_handle(execution_id, run_id=run_id).fetch_history()
        histories.append(history.events)
        first = history.events[0].workflow_execution_started_event_attributes if history.events else None
        run_ids.append(run_id or (first.original_execution_run_id if first else ""))
        if first is None or not first.continued_execution_run_id:
            break
        run_id = first.continued_execution_run_id
    histories.reverse()
    run_ids.reverse()
    return histories, run_ids
