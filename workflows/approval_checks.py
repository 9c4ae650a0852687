"""What a run of generation-45 adds to its approvals (issue 45), beside the bookkeeping of
``workflows/approvals.py``: the approvers file it pinned, and decisions that wait to be judged
again against the file as it is when they arrive.

* **The pin.** The first gate that comes from a worker with an approvers file pins the file's
  SHA-256 in the run (carried across continue-as-new, ``Continuation.approvers_sha256``). Every
  later gate is asked with it (``GateInput.pinned``): a worker without the file, or with another
  that does not supersede it, fails the attempt, and the retry goes to another worker. A gate
  that still comes back without the file (a worker of an older version), or with another, is
  not taken: the call is refused, said so in its record.
* **Decisions judged again.** A decision on a call under an approvers file that passes the checks
  when it arrives is queued (``Queued``); the waiting call asks the gate again with the queued
  decisions in its input (``GateInput.recheck``) and judges them against both gates: a key
  removed or retired since the call asked, or a person no longer allowed, no longer counts,
  approvals already counted included. A signature dated after the file was read again (beyond
  the clock skew) is refused. The audit judges exactly the decisions the input names.

Workflow code: deterministic (everything judged comes from the history)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.approvals.gate import ApprovalGate, GateInput, RecheckedOffer, pin_problem
    from codemode.approvals.tally import Offer
    from codemode.workflows.models import ApprovalRecord, CodeExecutionRequest, PendingApproval

GATE_TIMEOUT = timedelta(seconds=30)
#: A worker that must not answer for the run fails the attempt: another worker retries soon.
GATE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), backoff_coefficient=2.0, maximum_interval=timedelta(minutes=1)
)
#: How long a recheck may take at least (a call about to time out still gets its answer).
RECHECK_AT_LEAST = timedelta(minutes=1)
#: What a decision refused by the run's own check of its gate is recorded as coming through.
APPROVERS_DOOR = "approvers"


@dataclass
class Queued:
    """A decision that passed the checks when it arrived, waiting to be judged again."""

    call_id: str
    offer: Offer
    record: ApprovalRecord
    source: Literal["signal", "update"]
    #: ``approve``/``deny`` for a signal, ``decide`` for an Update.
    name: str
    by: str = ""
    update_id: str | None = None
    #: The answer as given (an Update that answers instead of the tool).
    answer: Any = None
    judged: bool = False
    refused: str | None = None

    def rechecked(self) -> RecheckedOffer:
        o = self.offer
        return RecheckedOffer(
            kind=o.kind,
            signature=o.signature.model_dump(mode="json") if o.signature is not None else None,
            edited=o.edited,
            answer=o.answer,
            answered=o.answered,
            comment=o.comment,
            door=o.door,
            rollback=o.rollback,
            by=self.by,
            source=self.source if self.source == "update" else self.name,
            update_id=self.update_id,
        )


class Checks:
    """The pin and the queue of one run (``Approvals.checks``)."""

    def __init__(self) -> None:
        #: The SHA-256 of the approvers file the run pinned (None: none seen yet).
        self.pinned: str | None = None
        #: Decisions waiting to be judged again, by call id, in the order they came.
        self.queued: dict[str, list[Queued]] = {}
        self.started_by: str | None = None
        self.start_signature: Any = None
        self.code_sha256: str | None = None

    def begin(self, req: CodeExecutionRequest) -> None:
        self.started_by, self.start_signature = req.started_by, req.start_signature
        self.code_sha256 = hashlib.sha256(req.code.encode()).hexdigest()

    def gate_input(self, review: PendingApproval, recheck: list[Queued] | None = None) -> GateInput:
        return GateInput(
            execution_id=workflow.info().workflow_id,
            call_id=review.call_id,
            tool=review.tool,
            args=review.args,
            kwargs=review.kwargs,
            pinned=self.pinned,
            started_by=self.started_by,
            start_signature=self.start_signature,
            code_sha256=self.code_sha256,
            recheck=[q.rechecked() for q in recheck] if recheck is not None else None,
            strict=True,
        )

    async def ask(
        self, review: PendingApproval, timeout: timedelta, recheck: list[Queued] | None = None
    ) -> ApprovalGate | str:
        """The worker's gate for ``review`` (a recheck with ``recheck``), or why there is none
        a run may take (a refusal, said in the call's record)."""
        try:
            gate = await workflow.execute_activity(
                names.APPROVAL_GATE,
                self.gate_input(review, recheck),
                result_type=ApprovalGate,
                start_to_close_timeout=GATE_TIMEOUT,
                schedule_to_close_timeout=timeout,
                retry_policy=GATE_RETRY,
                summary=(
                    f"check {len(recheck)} decision(s) on call {review.call_id} against the approvers file"
                    if recheck is not None
                    else f"who may decide call {review.call_id} ({review.tool})"
                ),
            )
        except ActivityError as err:
            cause = err.cause.message if err.cause is not None and hasattr(err.cause, "message") else str(err)
            return f"no worker could check the call against the approvers file in time: {cause}"
        problem = self.problem(gate, recheck=recheck is not None)
        if problem is not None:
            return problem
        if gate.configured and recheck is None:
            self.pinned = gate.file_sha256
        return gate

    def problem(self, gate: ApprovalGate, *, recheck: bool) -> str | None:
        """Why the run does not take ``gate`` (the pin), or None."""
        return pin_problem(self.pinned, gate, recheck=recheck)


def refused_by_approvers(review: PendingApproval, why: str) -> ApprovalRecord:
    """The record of a call the run refused because no gate it may take answered."""
    return ApprovalRecord(
        decision="denied", by="approvers file", comment=why, asked_arguments=review.arguments, door=APPROVERS_DOOR
    )


def recheck_timeout(left: timedelta) -> timedelta:
    return max(left, RECHECK_AT_LEAST)
