"""The notify activities a worker runs: start an event's notify workflow when this worker has
a channel (``start``, a local activity of the run), what channels it has (``plan``), one event
on one channel (``deliver``, retried by the notify workflow's policy), and whether a call still
waits (``still_pending``, from the execution's memo: no worker of it needed)."""

from __future__ import annotations

import logging
from datetime import timedelta

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from codemode.activities import names
from codemode.approvals.notify.channels import ChannelRefused, send_email, send_webhook
from codemode.approvals.notify.config import NotifyConfig
from codemode.approvals.notify.events import NotifyRequest

log = logging.getLogger(__name__)

START = names.NOTIFY_START
PLAN = "codemode.notify.plan"
DELIVER = "codemode.notify.deliver"
STILL_PENDING = "codemode.notify.still_pending"


class NotifyPlan(BaseModel):
    channels: list[str] = Field(default_factory=list)
    reminders: list[float] = Field(default_factory=list)
    initial_interval: float = 1.0
    maximum_interval: float = 60.0
    give_up_after: float = 24 * 3600


class DeliverInput(BaseModel):
    channel: str
    request: NotifyRequest


class StartNotice(BaseModel):
    #: The notify workflow's id (deterministic: a retry of this start finds it started).
    workflow_id: str
    workflow_type: str
    request: NotifyRequest


class PendingInput(BaseModel):
    execution_id: str
    call_id: str


class NotifyActivities:
    """Bound to the worker's notify config (None: no channel, every event ends at ``plan``)."""

    def __init__(self, config: NotifyConfig | None) -> None:
        self.config = config

    @activity.defn(name=START)
    async def start(self, inp: StartNotice) -> str:
        """Start the event's notify workflow, on its own (never the run's child: the run's
        history gets no event of it), when this worker has a channel at all."""
        if self.config is None or not self.config.channels():
            return "no channel configured on this worker"
        try:
            await activity.client().start_workflow(
                inp.workflow_type,
                inp.request,
                id=inp.workflow_id,
                task_queue=activity.info().task_queue,
                static_summary=f"{inp.request.event} for call {inp.request.call_id} of {inp.request.execution_id}",
            )
        except WorkflowAlreadyStartedError:
            return "already started"
        return "started"

    @activity.defn(name=PLAN)
    async def plan(self) -> NotifyPlan:
        c = self.config
        if c is None:
            return NotifyPlan()
        return NotifyPlan(
            channels=c.channels(),
            reminders=c.reminders,
            initial_interval=c.retry.initial_interval,
            maximum_interval=c.retry.maximum_interval,
            give_up_after=c.retry.give_up_after,
        )

    @activity.defn(name=DELIVER)
    async def deliver(self, inp: DeliverInput) -> str:
        c = self.config
        if c is None:
            return "no notify config on this worker"
        req = inp.request
        try:
            if inp.channel == "email" and c.email is not None:
                sent = await send_email(c, c.email, req)
                return f"{sent} message(s) sent"
            kind, _, index = inp.channel.partition(":")
            if kind == "webhook" and index.isdigit() and int(index) < len(c.webhooks):
                status = await send_webhook(c, c.webhooks[int(index)], req)
                return f"HTTP {status}"
        except ChannelRefused as err:
            raise ApplicationError(str(err), type="ChannelRefused", non_retryable=True) from None
        except Exception as err:
            log.info(
                "%s for %s on %s failed (attempt %s): %s",
                req.event,
                req.idempotency_key,
                inp.channel,
                activity.info().attempt,
                err,
            )
            raise ApplicationError(f"{inp.channel}: {type(err).__name__}: {err}", type="ChannelDown") from None
        return f"channel {inp.channel} is no longer configured on this worker"

    @activity.defn(name=STILL_PENDING)
    async def still_pending(self, inp: PendingInput) -> bool:
        from temporalio.client import WorkflowExecutionStatus

        desc = await activity.client().get_workflow_handle(inp.execution_id).describe()
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return False
        entries = (await desc.memo()).get("pending_approvals") or []
        return any(isinstance(e, dict) and e.get("call_id") == inp.call_id for e in entries)

    def activities(self) -> list[object]:
        return [self.start, self.plan, self.deliver, self.still_pending]


#: How long one attempt may run (the channel's own timeouts are shorter).
ATTEMPT_TIMEOUT = timedelta(seconds=30)
