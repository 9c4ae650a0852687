"""Telling people that a call waits for them: a notify config (webhooks, email, the inbox's
address, reminders), the events, their signatures, signed links, and the delivery activities.

The workflow side (``workflows/notify_workflow.py``) runs each event as a workflow of its own
that outlives the run, so a receiver down for a while still gets it and nothing ever waits
on a channel."""

from codemode.approvals.notify.config import NotifyConfig, NotifyConfigError, load_notify_config
from codemode.approvals.notify.events import NotifyRequest

__all__ = ["NotifyConfig", "NotifyConfigError", "NotifyRequest", "load_notify_config"]
