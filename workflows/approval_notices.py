"""The execution's side of notifications: each approval event (requested, decided, expired)
starts a ``CodeModeNotifyWorkflow`` child that the run abandons, in a task of its own, so the
run never waits on a channel (only, before it ends or continues as new, on the children's
starts: a server round trip). Which channels exist is the worker's business: the workflow
always says what happened. Histories recorded before this existed replay without it
(``NOTIFY_PATCH``)."""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from codemode.activities.notify.events import DecidedInfo, EventName, NotifyRequest, excerpt
    from codemode.workflows.models import CODE_APPROVAL_ID, ApprovalRecord, PendingApproval
    from codemode.workflows.notify_workflow import NOTIFY_WORKFLOW

NOTIFY_PATCH = "approval-notify"


class Notices:
    def __init__(self) -> None:
        self._starting: list[asyncio.Task[None]] = []
        #: The code, for the lines around a call (set by the run).
        self.code = ""

    def send(self, event: EventName, review: PendingApproval, decision: ApprovalRecord | None = None) -> None:
        if not workflow.patched(NOTIFY_PATCH):
            return
        info = workflow.info()
        code = str(review.args[0]) if review.call_id == CODE_APPROVAL_ID and review.args else self.code
        req = NotifyRequest(
            event=event,
            execution_id=info.workflow_id,
            call_id=review.call_id,
            tool=review.tool,
            summary=review.summary,
            arguments=review.arguments,
            code=excerpt(code, review.line),
            asked_at=review.asked_at,
            deadline=review.deadline,
            decided=None
            if decision is None or event != "approval.decided"
            else DecidedInfo(
                decision=decision.decision,
                by=decision.by,
                door=decision.door,
                comment=decision.comment,
                approved_arguments=decision.approved_arguments,
                answered=decision.answered,
            ),
        )
        # Unique across the namespace (run ids are), and the same on a replay under another id.
        child_id = f"codemode-notify:{info.first_execution_run_id}:{review.call_id}:{event.partition('.')[2]}"
        self._starting.append(asyncio.create_task(self._start(req, child_id)))

    async def _start(self, req: NotifyRequest, child_id: str) -> None:
        try:
            await workflow.start_child_workflow(
                NOTIFY_WORKFLOW,
                req,
                id=child_id,
                task_queue=workflow.info().task_queue,
                parent_close_policy=ParentClosePolicy.ABANDON,
                static_summary=f"{req.event} for call {req.call_id}",
            )
        except Exception as err:  # noqa: BLE001 - a notification never fails the run
            workflow.logger.warning("notification %s for call %s not started: %s", req.event, req.call_id, err)

    async def settled(self) -> None:
        """Wait until every child started here has started (not until it delivered)."""
        if self._starting:
            await asyncio.gather(*self._starting)
            self._starting.clear()
