"""The notify workflow's histories replay: the committed ones (each version of its commands:
``notify0-*`` were recorded before reminders were sent per channel) and one recorded now, with
two channels, a reminder, and a call nobody decides (``CODEMODE_RECORD_NOTIFY=PREFIX`` writes
it beside the committed ones)."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.approvals.notify.config import NotifyConfig
from codemode.client.executions import start_execution
from codemode.worker.dev_server import free_port
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from codemode.workflows.notify_workflow import NOTIFY_WORKFLOW, CodeModeNotifyWorkflow

from .conftest import TOOLS_MODULE
from .receivers import Receiver, smtp_server
from .test_notifications import CODE, SECRET

HISTORIES = Path(__file__).parent / "histories"


async def _replay(converter, histories: list[WorkflowHistory]) -> dict[str, str]:
    replayer = Replayer(workflows=[CodeModeNotifyWorkflow], data_converter=converter)

    async def each():
        for h in histories:
            yield h

    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
    return {wid: str(err) for wid, err in results.replay_failures.items()}


async def _requested_notify_id(client, execution_id: str) -> str:
    """The id of the notify workflow an execution's approval request started."""
    first_run = (await client.get_workflow_handle(execution_id).describe()).run_id
    query = f"WorkflowType = '{NOTIFY_WORKFLOW}' AND WorkflowId STARTS_WITH 'codemode-notify:{first_run}:'"
    for _ in range(100):
        ids = [w.id async for w in client.list_workflows(query) if w.id.endswith(":requested")]
        if ids:
            return ids[0]
        await asyncio.sleep(0.1)
    raise AssertionError(f"no notify workflow for {execution_id}")


async def test_committed_notify_histories_replay(converter) -> None:
    files = sorted(HISTORIES.glob("notify*.json"))
    assert files
    assert await _replay(converter, [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]) == {}


async def test_a_reminded_then_expired_call_records_a_history_that_replays(client, task_queue, events_file) -> None:
    receiver = Receiver(SECRET, free_port())
    await receiver.up()
    smtp, mailbox = smtp_server(free_port())
    config = NotifyConfig.model_validate(
        {
            "webhooks": [{"url": receiver.url, "secret": SECRET}],
            "email": {"host": "127.0.0.1", "port": smtp.port, "from": "c@example.com", "to": ["a@example.com"]},
            # The call waits 6 s: a reminder 3 s before its deadline.
            "reminders": ["3s"],
        }
    )
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, notify=config)
    try:
        async with worker.running():
            request = CodeExecutionRequest(code=CODE, approval_timeout=timedelta(seconds=6))
            handle = await start_execution(client, request, task_queue=task_queue)
            assert not (await handle.result()).success
            await receiver.wait_for("approval.expired")
            await mailbox.wait_for(3)
            notify = client.get_workflow_handle(await _requested_notify_id(client, handle.id))
            await notify.result()
            history = await notify.fetch_history()
    finally:
        await receiver.down()
        smtp.stop()
    assert receiver.events() == ["approval.requested", "approval.reminder", "approval.expired"]
    if prefix := os.environ.get("CODEMODE_RECORD_NOTIFY"):
        (HISTORIES / f"{prefix}-reminded.json").write_text(history.to_json())
    assert await _replay(client.data_converter, [history]) == {}
