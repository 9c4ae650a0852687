"""Undo in a run: the log of applied calls, and the rollback that walks it (issue 47).

A saga kept in the run. A call of a tool that declares a compensation enters the log once its
result is in the history (the tool's activity completed); a call whose attempt was cut off (its
worker died, it overran its timeout, the run was cancelled while it ran) enters it as
``indeterminate``: nobody knows whether it was applied. The log is workflow state: it rides
along when the run continues as new (ids, tools, the compensation's spec, results up to
``UNDO_RESULT_BYTES``), and ``status``, the outcome and the ``undo_log`` query show it.

A rollback (asked for by "deny and roll back", the ``rollback`` Update, the request's
``on_failure="compensate"``, or a rollback execution for a run that has ended) walks the log
newest first, or all at once when asked. For each entry: an indeterminate one is first put to
its tool's ``reconcile`` (no reconcile: reported, never compensated blindly); a compensation
that asks a person waits for a decision under the same rules as a call (``undo-<id>``); then
the compensation runs as its own activity (``compensate:<tool>``, activity id
``compensate-<id>``) with its own retry policy. One that fails does not stop the others.

Only regular activities here (never a local one: parallel compensations run in coroutines of
their own, ``tests/workflows/test_determinism.py``). Workflow code: deterministic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as TemporalTimeoutError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import (
        CallRequest,
        CompensateInput,
        CompensateOutput,
        ReconcileOutput,
        ToolOutput,
    )
    from codemode.activities.tools import RECONCILE_PREFIX
    from codemode.activities.undo_records import (
        SETTLED,
        RollbackInfo,
        RollbackRequest,
        UndoEntry,
        UndoLog,
        undo_call_id,
    )
    from codemode.workflows.approvals import Approvals, permission_error
    from codemode.workflows.models import ApprovalRecord, ErrorInfo, ExecutionState, PendingApproval
    from codemode.workflows.versions import Versions

#: The generation that keeps the log and can roll back (``workflows/versions.py``).
UNDO_GENERATION = "generation-47"
#: A result is kept for its compensation up to this size (as its JSON text when large), and
#: all the log's kept results together up to ``UNDO_BUDGET``: past either, the call is logged
#: ``cannot_undo`` (the log rides along in every continue-as-new and every status answer).
UNDO_RESULT_BYTES = 64 * 1024
UNDO_BUDGET = 1024 * 1024
#: How long a reconcile may take (it asks the other side one question).
RECONCILE_TIMEOUT = timedelta(seconds=60)
RECONCILE_RETRY = RetryPolicy(
    maximum_attempts=5, initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)
)


class Undo:
    """The log of applied calls of one execution, and its rollback. It answers the run's
    ``approvals`` about "deny and roll back" and what it would compensate."""

    def __init__(self, versions: Versions, approvals: Approvals) -> None:
        self.versions = versions
        self.approvals = approvals
        self.entries: dict[str, UndoEntry] = {}
        #: Bytes of results kept for compensations (``UNDO_BUDGET``).
        self.kept = 0
        self.rollback: RollbackInfo | None = None
        #: A rollback execution: the execution whose calls it undoes (their idempotency keys).
        self.of_execution: str | None = None
        #: The code has ended: no rollback is taken any more (one of its own is, after the run).
        self.closed = False
        if self.on:
            approvals.on_rollback = self.deny_and_roll_back
            approvals.undo_preview = self.preview

    @property
    def on(self) -> bool:
        """Whether this run keeps the log (recorded by generation-47 or later)."""
        return self.versions.since(UNDO_GENERATION)

    # -- the log ---------------------------------------------------------------------------

    def applied(self, call: CallRequest, out: ToolOutput) -> None:
        """``call`` (as it ran) returned ``out``: its result is in the history."""
        if not self.on or call.undo is None:
            return
        entry = self._entry(call)
        entry.result_size = out.size
        fits = out.size <= UNDO_RESULT_BYTES and self.kept + out.size <= UNDO_BUDGET
        if not fits:
            entry.state = "cannot_undo"
            entry.why = (
                f"its result ({out.size} bytes) is larger than the {UNDO_RESULT_BYTES} bytes kept for a "
                "compensation (or the log's budget is spent): have the tool return an id, not the data"
            )
        elif out.value_json is not None:
            entry.result_json = out.value_json
            self.kept += out.size
        else:
            entry.result = out.value
            self.kept += out.size

    def unknown(self, call: CallRequest, why: str) -> None:
        """``call``'s attempt was cut off: it may or may not have been applied."""
        if not self.on or call.undo is None:
            return
        entry = self._entry(call)
        entry.state, entry.why = "indeterminate", why

    def _entry(self, call: CallRequest) -> UndoEntry:
        assert call.undo is not None
        entry = UndoEntry(
            call_id=call.call_id,
            tool=call.tool,
            summary=call.summary,
            args=call.args,
            kwargs=call.kwargs,
            undo=call.undo,
        )
        self.entries[call.call_id] = entry
        return entry

    def view(self) -> UndoLog:
        return UndoLog(entries=list(self.entries.values()), rollback=self.rollback, of_execution=self.of_execution)

    def restore(self, log: UndoLog | None) -> None:
        if log is None:
            return
        self.entries = {e.call_id: e for e in log.entries}
        self.kept = sum(e.result_size for e in log.entries if e.state != "cannot_undo")
        self.rollback, self.of_execution = log.rollback, log.of_execution

    def would_compensate(self) -> list[UndoEntry]:
        """What a rollback now would try, newest first (the inbox shows it beside "deny and roll back")."""
        return [e for e in reversed(self.entries.values()) if e.state not in SETTLED]

    def preview(self) -> list[str]:
        return [f"{e.call_id}: {e.summary}" for e in self.would_compensate()]

    def shown(self, pending: list[PendingApproval]) -> list[PendingApproval]:
        """Waiting calls as ``status`` shows them: with what "deny and roll back" compensates now."""
        if not self.on:
            return pending
        would = self.preview()
        return [p.model_copy(update={"would_compensate": would}) if p.can_undo is not None else p for p in pending]

    def shown_log(self) -> UndoLog | None:
        """The log as ``status`` and the outcome carry it (None: nothing to show)."""
        return self.view() if self.entries or self.rollback else None

    # -- the rollback ----------------------------------------------------------------------

    def validate(self, request: RollbackRequest) -> None:
        """The ``rollback`` Update's validator: refused before anything is recorded."""
        if not self.on:
            raise ValueError("this run started before undo existed: it keeps no log of what it applied")
        if self.closed and not self.requested:
            raise ValueError("the run's code has ended: codemode rollback rolls it back with a run of its own")
        if not request.by.strip():
            raise ValueError("say who asks: by must not be empty")

    def stop(self, info: RollbackInfo) -> None:
        """Roll the run back: its code stops at the next step, calls that wait are withdrawn."""
        if not self.closed and self.request(info):
            self.approvals.withdraw("the run rolls back" + (f" (asked by {info.by})" if info.by else ""))

    def deny_and_roll_back(self, call_id: str, record: ApprovalRecord) -> None:
        self.stop(RollbackInfo(trigger="deny", by=record.by, reason=record.comment, door=record.door, call_id=call_id))

    def request(self, info: RollbackInfo) -> bool:
        """Ask for a rollback; False when one was asked for already (the first one stands)."""
        if self.rollback is not None:
            return False
        self.rollback = info
        return True

    @property
    def requested(self) -> bool:
        return self.rollback is not None

    async def roll_back(
        self, execution_id: str, approval_timeout: timedelta, set_state: Callable[[ExecutionState], None]
    ) -> None:
        """Compensate every entry not settled yet: newest first, or all at once."""
        info = self.rollback
        assert info is not None
        todo = self.would_compensate()
        approvals = self.approvals
        set_state("rolling_back")
        approvals.after_wait = "rolling_back"
        workflow.set_current_details(
            f"**Rolling back** {len(todo)} call{'s' if len(todo) != 1 else ''}"
            + (f" (asked by {info.by})" if info.by else "")
        )
        if info.order == "parallel":
            await asyncio.gather(*(self._one(e, execution_id, approvals, approval_timeout) for e in todo))
        else:
            for entry in todo:
                await self._one(entry, execution_id, approvals, approval_timeout)
        info.finished = True

    async def _one(self, e: UndoEntry, execution_id: str, approvals: Approvals, timeout: timedelta) -> None:
        target = CompensateInput(
            execution_id=execution_id,
            call_id=e.call_id,
            args=e.args,
            kwargs=e.kwargs,
            result=e.result,
            result_json=e.result_json,
        )
        if e.state == "indeterminate":
            if not e.undo.reconcile:
                return  # reported as it is: nobody knows whether there is anything to undo
            try:
                found: ReconcileOutput = await workflow.execute_activity(
                    RECONCILE_PREFIX + e.tool,
                    target,
                    result_type=ReconcileOutput,
                    activity_id=f"reconcile-{e.call_id}",
                    start_to_close_timeout=RECONCILE_TIMEOUT,
                    retry_policy=RECONCILE_RETRY,
                    summary=f"was it applied? {e.summary}"[:200],
                )
            except ActivityError as err:
                _raise_if_cancelled(err)
                e.error = _failure(err, "reconcile")
                return
            if not found.applied:
                e.state, e.reconciled = "nothing_to_do", "not_applied"
                return
            e.reconciled, e.state, e.error = "applied", "applied", None
            target.result, target.result_json = found.result, None
            e.result, e.result_json = found.result, None
        if e.undo.requires_approval:
            record = await approvals.review_call(self._as_call(e), timeout, _nothing_to_park)
            e.approval = record
            if record.decision != "approved":
                e.state, e.error = "failed", permission_error(f"undoing call {e.call_id}", record)
                return
        e.state = "compensating"
        try:
            done: CompensateOutput = await workflow.execute_activity(
                e.undo.activity,
                target,
                result_type=CompensateOutput,
                activity_id=f"compensate-{e.call_id}",
                start_to_close_timeout=timedelta(seconds=e.undo.timeout_seconds),
                retry_policy=RetryPolicy(
                    maximum_attempts=e.undo.max_attempts,
                    initial_interval=timedelta(seconds=1),
                    backoff_coefficient=2.0,
                    maximum_interval=timedelta(seconds=30),
                ),
                summary=f"undo {e.summary}"[:200],
            )
        except ActivityError as err:
            e.state = "failed"
            e.error = _failure(err, "compensation")
            e.attempts = _attempts(err, e.undo.max_attempts)
            _raise_if_cancelled(err)
            return
        e.state = "compensated" if done.compensated else "nothing_to_do"
        e.attempts, e.error = done.attempt, None

    @staticmethod
    def _as_call(e: UndoEntry) -> CallRequest:
        """The compensation as a call that waits for a person (``undo-<id>``): what it undoes,
        with the arguments the call ran with (what a signature covers); approved as it is."""
        label = f" with {e.undo.label}" if e.undo.label else ""
        return CallRequest(
            call_id=undo_call_id(e.call_id),
            tool=e.undo.activity,
            args=e.args,
            kwargs=e.kwargs,
            summary=f"undo call {e.call_id}{label}: {e.summary}"[:300],
            requires_approval=True,
            approval_reason=f"undoing call {e.call_id} asks a person first",
        )


async def _nothing_to_park() -> None:
    """A rollback holds no sandbox while a compensation waits for a person."""


def indeterminate(err: ActivityError) -> str | None:
    """Why a tool call that failed may have been applied all the same, or None: its last attempt
    was lost (timed out: its worker died, or it overran), or the tool said its outcome is
    unknown (sent, then no answer; an earlier attempt lost)."""
    cause = err.cause
    if isinstance(cause, TemporalTimeoutError):
        return "its last attempt timed out (its worker may have died while it ran): it may have been applied"
    details = cause.details if isinstance(cause, ApplicationError) else ()
    if details and isinstance(details[0], dict) and details[0].get("indeterminate"):
        assert isinstance(cause, ApplicationError)
        return f"its outcome is unknown ({cause.type}: {cause.message})"[:500]
    return None


def _raise_if_cancelled(err: ActivityError) -> None:
    if isinstance(err.cause, CancelledError):
        raise asyncio.CancelledError(str(err.cause)) from err


def _failure(err: ActivityError, what: str) -> ErrorInfo:
    cause = err.cause
    if isinstance(cause, ApplicationError):
        return ErrorInfo(type=cause.type or "RuntimeError", message=cause.message, kind=what)
    if isinstance(cause, TemporalTimeoutError):
        return ErrorInfo(type="TimeoutError", message=f"the {what} timed out", kind=what)
    if isinstance(cause, CancelledError):
        return ErrorInfo(type="CancelledError", message=f"the {what} was cancelled while it ran", kind=what)
    return ErrorInfo(type="RuntimeError", message=f"the {what} failed: {cause or err}", kind=what)


def _attempts(err: ActivityError, most: int) -> int:
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.details and isinstance(cause.details[0], dict):
        return int(cause.details[0].get("attempt", most))
    return most
