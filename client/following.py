"""Following and deciding executions from a client: what the CLI, the pydantic-ai capability
and the MCP front all need, in one place.

* ``query_status``: the workflow's ``status`` query, or None when no worker answers.
* ``wait_for_outcome``: the outcome, or, with ``until_parked``, the status of a run that
  stopped to wait for a person (so a caller that cannot decide itself hands the run back).
* ``parked``: whether a run waits for a person, from its memo (the server answers).
* ``send_decision``: approve or deny one pending call as a person: through the workflow's
  ``decide`` Update when a worker answers (the recorded decision comes back, or why it was
  refused), else as a signal that the workflow applies when a worker is back.
* ``closed_word`` and ``cancel_reason``: how a closed execution ended, in our words.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from codemode.approvals.signing import DecisionSignature
from codemode.workflows.models import (
    Answer,
    ApprovalRecord,
    ApproveSignal,
    Decision,
    DenySignal,
    ExecutionOutcome,
    ExecutionStatus,
)

#: How long a status query waits for a worker to answer.
QUERY_TIMEOUT = timedelta(seconds=5)
#: How long a decision through the Update waits for the worker (then it is sent as a signal).
UPDATE_TIMEOUT = timedelta(seconds=10)
#: How often a follower asks for the status while it waits.
POLL_SECONDS = 0.3
#: A follower that only waits for the run to park asks the server ever less often, up to this.
PARKED_POLL_MAX_SECONDS = 2.0


class DecisionRefused(ValueError):
    """The workflow refused the decision (the call is not waiting for one); nothing was recorded."""


async def query_status(handle: WorkflowHandle[Any, Any], since: int | None = None) -> ExecutionStatus | None:
    """The workflow's status query (the calls from index ``since``, or the latest page), or
    None when no worker answers in time."""
    args = [] if since is None else [since]
    try:
        return await handle.query("status", *args, result_type=ExecutionStatus, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return None


async def parked(handle: WorkflowHandle[Any, Any]) -> bool | None:
    """Whether the execution waits for a person, from the memo the workflow keeps (the
    server answers; None when it does not)."""
    try:
        description = await handle.describe(rpc_timeout=QUERY_TIMEOUT)
        return bool(await description.memo_value("pending_approvals", None))
    except RPCError:
        return None


async def waiting_status(handle: WorkflowHandle[Any, Any]) -> ExecutionStatus | None:
    """The status of a run that waits for a person (the calls it waits on), else None.
    Whether it waits comes from its memo (``parked``: the server answers); only then is its
    worker asked. A parked run is not about to end, so that query does not race the run's end
    (which makes the SDK core log "Query not found" on the worker), and a run that goes on
    costs its worker no query at all."""
    if not await parked(handle):
        return None
    status = await query_status(handle)
    if status is None or status.state != "awaiting_approval" or not status.pending_approvals:
        return None
    return status


async def wait_for_outcome(
    handle: WorkflowHandle[Any, ExecutionOutcome],
    *,
    until_parked: bool = False,
    poll_seconds: float = POLL_SECONDS,
) -> ExecutionOutcome | ExecutionStatus:
    """The execution's outcome. With ``until_parked``, a run that parks on an approval returns
    its ``ExecutionStatus`` (state ``awaiting_approval``, the pending calls) instead, and keeps
    waiting durably on the server (``waiting_status``; the wait between looks grows to
    ``PARKED_POLL_MAX_SECONDS``)."""
    if not until_parked:
        return await handle.result()
    result = asyncio.ensure_future(handle.result())
    asking: asyncio.Future[Any] | None = None
    wait = poll_seconds
    try:
        while True:
            done, _ = await asyncio.wait({result}, timeout=wait)
            if done:
                return result.result()
            # Look while still waiting for the result: an outcome that arrives meanwhile is
            # returned at once, not after the look's round trips.
            asking = asyncio.ensure_future(waiting_status(handle))
            done, _ = await asyncio.wait({result, asking}, return_when=asyncio.FIRST_COMPLETED)
            if result in done:
                return result.result()
            wait = min(wait * 2, PARKED_POLL_MAX_SECONDS)
            status = await asking
            if status is not None:
                return status
    finally:
        if not result.done():
            result.cancel()
        if asking is not None and not asking.done():
            # A look in flight is left to finish (milliseconds): the server logs a cancelled
            # request as a service failure.
            asking.add_done_callback(quietly)


def quietly(done: asyncio.Future[Any]) -> None:
    """A done-callback that retrieves a look's outcome, so nothing logs it as unretrieved."""
    if not done.cancelled():
        done.exception()


async def send_decision(
    handle: WorkflowHandle[Any, Any],
    call_id: str | Decision,
    *,
    approve: bool = True,
    by: str = "",
    comment: str | None = None,
    via_update: bool = True,
    arguments: dict[str, Any] | None = None,
    answer: Answer | None = None,
    door: str | None = None,
    signature: DecisionSignature | None = None,
) -> ApprovalRecord | None:
    """Decide one pending call as ``by``: every door (CLI, inbox, signed links, MCP,
    pydantic-ai) sends its decisions through here. Pass a ``Decision``, or its parts.

    Through the ``decide`` Update (when ``via_update`` and a worker answers): returns the
    recorded decision, or raises ``DecisionRefused`` (a call not pending, edited arguments or
    an answer that do not fit the tool). Else as a signal, recorded in the history now and
    applied when a worker runs the workflow: returns None. Edited arguments and answers are
    checked by the workflow before they are recorded, so they need a worker: without one they
    are refused here. ``signature``: the decision signed (``client/signing.py``), which
    a worker with an approvers file requires (also carried by the signal)."""
    if isinstance(call_id, Decision):
        decision = call_id
    else:
        decision = Decision(
            call_id=call_id,
            approve=approve,
            by=by,
            comment=comment,
            arguments=arguments,
            answer=answer,
            door=door,
            signature=signature,
        )
    if via_update:
        try:
            return await handle.execute_update(
                "decide", decision, result_type=ApprovalRecord, rpc_timeout=UPDATE_TIMEOUT
            )
        except WorkflowUpdateFailedError as err:
            raise DecisionRefused(str(err.cause or err)) from None
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise DecisionRefused(f"nothing to decide, the call is not waiting any more: {err.message}") from None
            # else: as below, the signal says what the server thinks
        except WorkflowUpdateRPCTimeoutOrCancelledError:
            pass  # no worker answered in time: signal instead
    if decision.arguments is not None or decision.answer is not None:
        raise DecisionRefused(
            "no worker answered: edited arguments and answers are checked by a worker before they count; "
            "try again when one runs"
        )
    assert decision.call_id is not None
    if decision.approve:
        signal = ApproveSignal(
            call_id=decision.call_id, by=decision.by, comment=decision.comment, signature=decision.signature
        )
        await handle.signal("approve", signal)
    else:
        denial = DenySignal(
            call_id=decision.call_id, by=decision.by, reason=decision.comment, signature=decision.signature
        )
        await handle.signal("deny", denial)
    return None


#: How Temporal closed an execution, in our state words, for the closings the workflow may not
#: have recorded in its own state (a terminate; a cancel or a timeout it did not see through).
CLOSED_STATES = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}


def closed_word(status: WorkflowExecutionStatus | None) -> str:
    """How an execution closed, in our state words where Temporal's differ (canceled)."""
    if status in CLOSED_STATES:
        return CLOSED_STATES[status]
    return status.name.lower() if status is not None else "unknown"


async def cancel_reason(handle: WorkflowHandle[Any, Any]) -> str:
    """The reason given with the cancellation request, from the history."""
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_cancel_requested_event_attributes"):
            return event.workflow_execution_cancel_requested_event_attributes.cause
    return ""
