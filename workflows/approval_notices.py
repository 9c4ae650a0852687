"""The execution's side of notifications: each approval event (requested, decided, expired)
is handed to an activity that starts a ``CodeModeNotifyWorkflow`` of its own, when the worker
has any channel (the worker decides; the workflow always says what happened). The run never
waits on a channel, and the notify workflow is not its child, so nothing it does adds an event
to the run's history; before the run ends or continues as new it waits only for those starts.

The start is a regular activity (three events in the history) in runs of the current
generation (``workflows/versions.py``). It was a local activity, started from the coroutine of
the call that waits, while the run's own steps are local activities of the main coroutine: two
local activities in flight from two coroutines, which the SDK resolves in completion order on a
first execution and in sequence order on replay (sdk-python #1578), and which Core mishandles
under cache pressure ("Attempted to check for LA marker handling in invalid state", seen by
``tests/workflows/replay_stress.py``). A run's local activities now come from its main
coroutine only, one at a time (a lint in ``tests/workflows/test_determinism.py`` keeps it so).
Runs recorded with the local activity replay with it (``NOTIFY_PATCH``), and runs recorded while
notifications were children replay with children (``CHILD_NOTIFY_PATCH``)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from codemode.activities.notify import START, StartNotice
    from codemode.approvals.notify.events import DecidedInfo, EventName, NotifyRequest, excerpt
    from codemode.workflows.models import CODE_APPROVAL_ID, ApprovalRecord, PendingApproval
    from codemode.workflows.notify_workflow import NOTIFY_WORKFLOW
    from codemode.workflows.versions import Versions

NOTIFY_PATCH = "approval-notify-started"
#: Runs recorded while each notification was an abandoned child of the run (main at 0b4239e)
#: replay with children: their completions landed in the run's history, which is why a run
#: now starts its notify workflows from a local activity instead.
CHILD_NOTIFY_PATCH = "approval-notify"


#: The start activity: quick, retried a few times, never failing the run.
START_TIMEOUT = timedelta(seconds=10)
START_RETRY = RetryPolicy(maximum_attempts=3)


class Notices:
    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        self._starting: list[asyncio.Task[None]] = []
        #: The code, for the lines around a call (set by the run).
        self.code = ""

    def send(self, event: EventName, review: PendingApproval, decision: ApprovalRecord | None = None) -> None:
        if self.versions.current:
            if not review.notify:  # the worker's gate said it has no channel: nobody to tell
                return
            start = self._start_activity
        elif self.versions.has(NOTIFY_PATCH):
            start = self._start
        elif self.versions.has(CHILD_NOTIFY_PATCH):  # only true replaying such a run
            start = self._start_child
        else:
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
        notify_id = f"codemode-notify:{info.first_execution_run_id}:{review.call_id}:{event.partition('.')[2]}"
        self._starting.append(asyncio.create_task(start(req, notify_id)))

    async def _start_activity(self, req: NotifyRequest, notify_id: str) -> None:
        try:
            await workflow.execute_activity(
                START,
                StartNotice(workflow_id=notify_id, workflow_type=NOTIFY_WORKFLOW, request=req),
                start_to_close_timeout=START_TIMEOUT,
                retry_policy=START_RETRY,
                summary=f"tell people: {req.event} for call {req.call_id}",
            )
        except Exception as err:  # noqa: BLE001 - a notification never fails the run
            workflow.logger.warning("notification %s for call %s not started: %s", req.event, req.call_id, err)

    async def _start(self, req: NotifyRequest, notify_id: str) -> None:
        """A run recorded before the current generation: the start as a local activity."""
        try:
            await workflow.execute_local_activity(
                START,
                StartNotice(workflow_id=notify_id, workflow_type=NOTIFY_WORKFLOW, request=req),
                start_to_close_timeout=START_TIMEOUT,
                retry_policy=START_RETRY,
                summary=f"tell people: {req.event} for call {req.call_id}",
            )
        except Exception as err:  # noqa: BLE001 - a notification never fails the run
            workflow.logger.warning("notification %s for call %s not started: %s", req.event, req.call_id, err)

    async def _start_child(self, req: NotifyRequest, child_id: str) -> None:
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
        """Wait until every notify workflow asked for here has been started (not delivered)."""
        if self._starting:
            await asyncio.gather(*self._starting)
            self._starting.clear()
