"""Notifications say what undo means before a person decides (issue 47): whether the waiting call
can be undone, and which earlier calls "deny and roll back" would compensate, in the webhook's
JSON, the email and the Slack message. Real receivers, the real dev server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.approvals.notify.config import NotifyConfig
from codemode.client.executions import start_execution
from codemode.worker.dev_server import free_port
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .receivers import Receiver, smtp_server
from .test_decisions import parked

SECRET = "whsec-test"
CODE = "transfer('acme', 100)\ntransfer('bolt', 200)\npayout('carbon', 5000)"


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("CODEMODE_TEST_LEDGER", str(path))
    yield path


async def test_a_waiting_call_is_told_with_what_undo_would_do(client, task_queue, events_file, ledger) -> None:
    receiver, slack = Receiver(SECRET, free_port()), Receiver(SECRET, free_port())
    smtp, mailbox = smtp_server(free_port())
    config = NotifyConfig.model_validate(
        {
            "webhooks": [
                {"url": receiver.url, "secret": SECRET},
                {"url": slack.url, "secret": SECRET, "format": "slack"},
            ],
            "email": {
                "host": "127.0.0.1",
                "port": smtp.port,
                "from": "codemode@example.com",
                "to": ["ana@example.com"],
            },
        }
    )
    tools = ToolRegistry.from_module("tests.workflows.undo_tools")
    worker = CodeModeWorker(client, tools, task_queue=task_queue, notify=config)
    await receiver.up()
    await slack.up()
    try:
        async with worker.running():
            handle = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
            await parked(handle)
            requested = await receiver.wait_for("approval.requested")
            assert requested["undo"] == {
                "can_undo": True,
                "label": "refund",
                "would_compensate": ["2: transfer(to='bolt', amount=200)", "1: transfer(to='acme', amount=100)"],
            }
            await mailbox.wait_for(1, timeout=60)
            body = mailbox.messages[0].get_payload(decode=True).decode()
            assert "Can be undone: yes (refund)" in body
            assert "Deny and roll back would compensate: 2: transfer(to='bolt', amount=200); 1: transfer" in body
            message = await slack.wait_for_text("Approval needed: payout(to='carbon', amount=5000)")
            section = message["blocks"][0]["text"]["text"]
            assert "Can be undone: yes (refund)" in section and "Deny and roll back would compensate: 2:" in section
            await handle.cancel()
    finally:
        await receiver.down()
        await slack.down()
        smtp.stop()
