"""Key rotation on a real server: a run started under k1 parks for an approval; a worker that
holds only k2 cannot read it and fails its next workflow task with an error naming k1 (the run
stays open); workers restarted with ``k2,k1`` finish it, restoring the checkpoint k1 sealed."""

from __future__ import annotations

import asyncio
import time

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionOutcome
from tests.workflows.test_approval import wait_for_state

from .conftest import K1, K2

PARK = "a = slow_step(1, 0)\nb = slow_step(2, 0)\nr = transfer('bob', a + b)\n[a, b, r['to']]"
TOOLS = "tests.workflows.tools_under_test"


async def first_workflow_task_failure(client, execution_id: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        history = await client.get_workflow_handle(execution_id).fetch_history()
        for e in history.events:
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return e.workflow_task_failed_event_attributes.failure.message
        await asyncio.sleep(0.2)
    raise AssertionError("no workflow task failed")


def key_ids_of(history) -> list[str]:
    """The key id of every encrypted payload of the history, in event order."""
    ids = []
    for e in history.events:
        for field in (
            "workflow_execution_started_event_attributes",
            "activity_task_scheduled_event_attributes",
            "workflow_execution_signaled_event_attributes",
            "workflow_execution_completed_event_attributes",
        ):
            if e.HasField(field):
                attrs = getattr(e, field)
                payloads = attrs.result if field.endswith("completed_event_attributes") else attrs.input
                ids += [p.metadata["encryption-key-id"].decode() for p in payloads.payloads]
    return ids


async def test_rotation_from_k1_to_k2(keyed_client, task_queue) -> None:
    registry = ToolRegistry.from_module(TOOLS)
    old = await keyed_client(K1)
    async with CodeModeWorker(old, registry, task_queue=task_queue).running():
        handle = await start_execution(old, CodeExecutionRequest(code=PARK), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
    (pending,) = status.pending_approvals

    # A worker that holds only the new key: the run's next workflow task fails, naming k1.
    new_only = await keyed_client(K2)
    await new_only.get_workflow_handle(handle.id).signal("approve", ApproveSignal(call_id=pending.call_id, by="ana"))
    async with CodeModeWorker(new_only, registry, task_queue=task_queue).running():
        message = await first_workflow_task_failure(new_only, handle.id)
    assert "encrypted under key id 'k1', which is not in CODEMODE_ENCRYPTION_KEYS (this process holds: k2)" in message
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING  # not lost

    # The workers restart with k2 first (it encrypts) and k1 kept (it still decrypts).
    rotated = await keyed_client(f"{K2},{K1}")
    async with CodeModeWorker(rotated, registry, task_queue=task_queue).running():
        rotated_handle = rotated.get_workflow_handle(handle.id, result_type=ExecutionOutcome)
        outcome = await asyncio.wait_for(rotated_handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == [10, 20, "bob"]
    history = await rotated_handle.fetch_history()
    ids = key_ids_of(history)
    assert ids[0] == "k1" and ids[-1] == "k2" and set(ids) == {"k1", "k2"}, ids
    # The step after the approval restored the checkpoint k1 sealed (no replay was needed).
    lines = display.audit_lines(await fetch_audit(rotated, handle.id))
    assert any("sandbox_resume" in ln and "restored from its checkpoint" in ln for ln in lines), lines
