"""Notifications: a parked call reaches a signed webhook and an inbox by email, a receiver that
is down for a while still gets it once, a reminder (late, for the receiver that was down) and
the decision follow. Real receivers
(aiohttp, aiosmtpd), the real dev server, the notify workflow's own retries."""

from __future__ import annotations

from datetime import timedelta

import pytest

from codemode.activities import ToolRegistry
from codemode.approvals.notify.config import NotifyConfig
from codemode.client.executions import start_execution
from codemode.client.following import send_decision
from codemode.worker.dev_server import free_port
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import TOOLS_MODULE
from .receivers import Receiver, smtp_server
from .test_decisions import parked

SECRET = "whsec-test"
CODE = "x = lookup('Paris')\nr = send_money('bob', 900)\nr['amount']"


@pytest.mark.slow
async def test_parked_call_is_told_signed_once_then_reminded_and_decided(client, task_queue, events_file) -> None:
    """The receiver is down from the moment the call parks until after the reminder is due; the
    request is retried until it is up and arrives once per idempotency key. The email channel
    is not held up by it: its request and its reminder arrive on time, during the outage. The
    receiver gets the reminder late, once, then the decision."""
    receiver = Receiver(SECRET, free_port())
    smtp, mailbox = smtp_server(free_port())
    config = NotifyConfig.model_validate(
        {
            "webhooks": [{"url": receiver.url, "secret": SECRET, "approver": "ana@example.com"}],
            "email": {
                "host": "127.0.0.1",
                "port": smtp.port,
                "from": "codemode@example.com",
                "to": ["ana@example.com"],
            },
            "inbox_url": "http://inbox.example.com",
            "links": {"secret": "links-secret"},
            # The call waits 90 s at most: a reminder 75 s before its deadline, ~15 s in,
            # while the receiver is down.
            "reminders": ["75s"],
            "retry": {"initial_interval": "0.5s", "maximum_interval": "1s"},
        }
    )
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=config)
    try:
        async with worker.running():
            # The receiver is down when the call parks: the delivery is retried until it is up.
            request = CodeExecutionRequest(code=CODE, approval_timeout=timedelta(seconds=90))
            handle = await start_execution(client, request, task_queue=task_queue)
            (pending,) = (await parked(handle)).pending_approvals
            await mailbox.wait_for(2, timeout=120)  # the email's request and its reminder, on time
            assert [m["Subject"].split(":")[0] for m in mailbox.messages] == [
                "Approval needed",
                "Reminder, approval still needed",
            ]
            assert receiver.seen == []
            await receiver.up()
            requested = await receiver.wait_for("approval.requested")
            assert requested["execution_id"] == handle.id and requested["call_id"] == pending.call_id
            assert requested["tool"] == "send_money" and requested["arguments"] == {"to": "bob", "amount": 900}
            assert requested["code"]["line"] == 2 and requested["code"]["lines"][1] == "r = send_money('bob', 900)"
            assert requested["deadline"] and requested["links"]["inbox"].endswith(
                f"/calls/{handle.id}/{pending.call_id}"
            )
            assert requested["links"]["approve"].startswith("http://inbox.example.com/link/")
            reminder = await receiver.wait_for("approval.reminder")
            assert reminder["call_id"] == pending.call_id
            await send_decision(handle, pending.call_id, approve=True, by="ana", door="cli")
            decided = await receiver.wait_for("approval.decided")
            assert decided["decision"]["by"] == "ana" and decided["decision"]["door"] == "cli"
            assert (await handle.result()).output == 900
            await mailbox.wait_for(3)  # the decision, by email too
    finally:
        await receiver.down()
        smtp.stop()
    # Each event once, signed; one idempotency key per event.
    assert receiver.events() == ["approval.requested", "approval.reminder", "approval.decided"]
    assert all(ok for _, ok, _ in receiver.seen)
    keys = [key for key, _, _ in receiver.seen]
    assert len(keys) == len(set(keys)) == 3 and keys[0] == f"{handle.id}/{pending.call_id}/approval.requested"
    subjects = [m["Subject"] for m in mailbox.messages]
    assert subjects[0] == "Approval needed: send_money(to='bob', amount=900)", subjects
    assert subjects[-1].startswith("Approved by ana"), subjects
    body = mailbox.messages[0].get_payload(decode=True).decode()
    assert ">    2  r = send_money('bob', 900)" in body and "Approve: http://inbox.example.com/link/" in body


async def test_without_a_config_nothing_is_sent_and_the_run_goes_on(client, task_queue, events_file) -> None:
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=None)
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        await send_decision(handle, pending.call_id, approve=True, by="ana")
        assert (await handle.result()).output == 900


async def test_a_call_nobody_decides_in_time_is_told_expired(client, task_queue, events_file) -> None:
    receiver = Receiver(SECRET, free_port())
    await receiver.up()
    config = NotifyConfig.model_validate({"webhooks": [{"url": receiver.url, "secret": SECRET, "format": "slack"}]})
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=config)
    try:
        async with worker.running():
            request = CodeExecutionRequest(code=CODE, approval_timeout=timedelta(seconds=3))
            handle = await start_execution(client, request, task_queue=task_queue)
            outcome = await handle.result()
            assert not outcome.success and outcome.error.type == "PermissionError"
            expired = await receiver.wait_for_text("No decision in time: send_money(to='bob', amount=900)")
    finally:
        await receiver.down()
    # Slack's incoming-webhook shape: text, and blocks with the code.
    assert expired["blocks"][1]["text"]["text"].startswith("```")
    assert all(ok for _, ok, _ in receiver.seen)
