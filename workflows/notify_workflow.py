"""``CodeModeNotifyWorkflow``: one notification event about one call, delivered on every
channel the worker's notify config has, each by an activity with its own retry policy.

The execution has it started by a local activity (``workflows/approval_notices.py``) as a
workflow of its own, not a child, so a receiver down for minutes still gets the event after
the run has moved on or ended, and nothing in the run waits on a channel.

A request event also sends the reminders, on each channel on its own: a channel sends the
request, then sleeps until each reminder point and sends a reminder while the call still
waits. A channel that is down delays only its own messages; a reminder point that passed while
the channel was down is sent late, once (the latest point that passed), rather than never;
points already past when the call began to wait are skipped. Runs recorded before this
(``PER_CHANNEL_PATCH``) replay on the old path: the request on every channel, then the
reminders on every channel."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.notify import (
        ATTEMPT_TIMEOUT,
        DELIVER,
        PLAN,
        STILL_PENDING,
        DeliverInput,
        NotifyPlan,
        PendingInput,
    )
    from codemode.approvals.notify.events import NotifyRequest
    from codemode.workflows.summary import in_words
    from codemode.workflows.versions import Versions

NOTIFY_WORKFLOW = "CodeModeNotifyWorkflow"
#: The patch marker of sending each channel's reminders on their own (a channel that is down
#: no longer delays the others' reminders, and a point passed during its outage is sent late).
PER_CHANNEL_PATCH = "notify-per-channel"
#: A channel this far past a reminder point is late (it was down): it asks again whether the
#: call still waits.
LATE = timedelta(seconds=5)


@workflow.defn(name=NOTIFY_WORKFLOW)
class CodeModeNotifyWorkflow:
    def __init__(self) -> None:
        self._versions = Versions()
        self._versions.begin()  # first (workflows/versions.py): patches are read nowhere else
        #: Whether the call still waits at each reminder point, asked once for every channel
        #: that reaches the point on time.
        self._still: dict[int, asyncio.Task[bool]] = {}

    @workflow.run
    async def run(self, req: NotifyRequest) -> list[str]:
        plan = await workflow.execute_local_activity(
            PLAN, result_type=NotifyPlan, start_to_close_timeout=timedelta(seconds=10)
        )
        if not plan.channels:
            return []
        if req.event != "approval.requested" or req.deadline is None:
            return await self._deliver(plan, req)
        if not self._versions.has(PER_CHANNEL_PATCH):
            return await self._all_channels_then_reminders(plan, req)
        began = req.asked_at or workflow.now()
        per_channel = await asyncio.gather(*(self._channel(plan, req, c, began) for c in plan.channels))
        return [line for lines in per_channel for line in lines]

    async def _channel(self, plan: NotifyPlan, req: NotifyRequest, channel: str, began: datetime) -> list[str]:
        """The request on ``channel``, then its reminders."""
        assert req.deadline is not None
        sent = [await self._one(plan, req, channel)]
        points = sorted(
            ((req.deadline - timedelta(seconds=before), index) for index, before in enumerate(plan.reminders)),
            key=lambda p: p[0],
        )
        points = [(at, index) for at, index in points if at > began]  # past when the call began to wait
        for n, (at, index) in enumerate(points):
            if n + 1 < len(points) and points[n + 1][0] <= workflow.now():
                continue  # a later point has passed too (this channel was down): send that one
            wait = at - workflow.now()
            if wait.total_seconds() > 0:
                await workflow.sleep(
                    wait,
                    summary=f"remind on {channel} at {in_words((req.deadline - at).total_seconds())} before the deadline",
                )
            if not await self._still_pending(req, index, late=workflow.now() - at > LATE):
                break
            reminder = req.model_copy(update={"event": "approval.reminder", "reminder": index})
            sent.append(await self._one(plan, reminder, channel))
        return sent

    def _still_pending(self, req: NotifyRequest, index: int, *, late: bool) -> asyncio.Task[bool]:
        """Whether the call still waits at reminder ``index``: asked once for the channels on
        time, and again for each channel that comes to it late (it may be decided by then)."""
        if late or index not in self._still:
            ask = asyncio.create_task(self._ask_still_pending(req))
            if late:
                return ask
            self._still[index] = ask
        return self._still[index]

    async def _ask_still_pending(self, req: NotifyRequest) -> bool:
        return await workflow.execute_activity(
            STILL_PENDING,
            PendingInput(execution_id=req.execution_id, call_id=req.call_id),
            result_type=bool,
            start_to_close_timeout=ATTEMPT_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=5),
        )

    async def _all_channels_then_reminders(self, plan: NotifyPlan, req: NotifyRequest) -> list[str]:
        """Before ``PER_CHANNEL_PATCH``: the request on every channel, then each reminder."""
        assert req.deadline is not None
        sent = await self._deliver(plan, req)
        for index, before in enumerate(plan.reminders):
            wait = (req.deadline - timedelta(seconds=before)) - workflow.now()
            if wait.total_seconds() <= 0:
                continue  # that point had passed when the call began to wait
            await workflow.sleep(wait, summary=f"remind {before:g}s before the deadline")
            if not await self._ask_still_pending(req):
                break
            reminder = req.model_copy(update={"event": "approval.reminder", "reminder": index})
            sent += await self._deliver(plan, reminder)
        return sent

    async def _deliver(self, plan: NotifyPlan, req: NotifyRequest) -> list[str]:
        """Every channel at once."""
        return list(await asyncio.gather(*(self._one(plan, req, c) for c in plan.channels)))

    async def _one(self, plan: NotifyPlan, req: NotifyRequest, channel: str) -> str:
        """``req`` on ``channel``, retried by its policy; one that never takes it is logged,
        never raised."""
        try:
            return await workflow.execute_activity(
                DELIVER,
                DeliverInput(channel=channel, request=req),
                result_type=str,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                schedule_to_close_timeout=timedelta(seconds=plan.give_up_after),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(seconds=plan.initial_interval),
                    maximum_interval=timedelta(seconds=plan.maximum_interval),
                    backoff_coefficient=2.0,
                    non_retryable_error_types=["ChannelRefused"],
                ),
                summary=f"{req.event} on {channel}",
            )
        except ActivityError as err:
            workflow.logger.warning("%s on %s was not delivered: %s", req.event, channel, err.cause or err)
            return f"{channel}: not delivered: {err.cause or err}"
