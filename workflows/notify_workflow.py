"""``CodeModeNotifyWorkflow``: one notification event about one call, delivered on every
channel the worker's notify config has, each by an activity with its own retry policy.

The execution has it started by a local activity (``workflows/approval_notices.py``) as a
workflow of its own, not a child, so a receiver down for minutes still gets the event after
the run has moved on or ended, and nothing in the run waits on a channel. A request event also sends the reminders: it sleeps until each
point before the deadline and sends one while the call still waits."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.notify.activities import (
        ATTEMPT_TIMEOUT,
        DELIVER,
        PLAN,
        STILL_PENDING,
        DeliverInput,
        NotifyPlan,
        PendingInput,
    )
    from codemode.activities.notify.events import NotifyRequest

NOTIFY_WORKFLOW = "CodeModeNotifyWorkflow"


@workflow.defn(name=NOTIFY_WORKFLOW)
class CodeModeNotifyWorkflow:
    @workflow.run
    async def run(self, req: NotifyRequest) -> list[str]:
        plan = await workflow.execute_local_activity(
            PLAN, result_type=NotifyPlan, start_to_close_timeout=timedelta(seconds=10)
        )
        if not plan.channels:
            return []
        sent = await self._deliver(plan, req)
        if req.event != "approval.requested" or req.deadline is None:
            return sent
        for index, before in enumerate(plan.reminders):
            wait = (req.deadline - timedelta(seconds=before)) - workflow.now()
            if wait.total_seconds() <= 0:
                continue  # that point had passed when the call began to wait
            await workflow.sleep(wait, summary=f"remind {before:g}s before the deadline")
            still = await workflow.execute_activity(
                STILL_PENDING,
                PendingInput(execution_id=req.execution_id, call_id=req.call_id),
                result_type=bool,
                start_to_close_timeout=ATTEMPT_TIMEOUT,
                retry_policy=RetryPolicy(maximum_attempts=5),
            )
            if not still:
                break
            reminder = req.model_copy(update={"event": "approval.reminder", "reminder": index})
            sent += await self._deliver(plan, reminder)
        return sent

    async def _deliver(self, plan: NotifyPlan, req: NotifyRequest) -> list[str]:
        """Every channel at once; a channel that never takes it is logged, never raised."""

        async def one(channel: str) -> str:
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

        return list(await asyncio.gather(*(one(c) for c in plan.channels)))
