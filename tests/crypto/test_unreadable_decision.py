"""A decision a worker cannot read is kept, never dropped (``workflows/signal_input.py``).

The SDK drops a signal whose input it cannot convert, with one log line. Here a run started and
parked by a client and a worker without keys gets its approval from a client that encrypts (a
misconfigured deployment): the keyless worker fails the workflow task with a message that says
why (the run stays open and still waits), and a worker that holds the key applies the decision
and finishes the run. Before the fix the keyless worker dropped the approval ("Failed
deserializing signal input for approve ... dropping the signal") and the call went on waiting,
with no failure anywhere to say why."""

from __future__ import annotations

import asyncio

from temporalio.client import WorkflowExecutionStatus

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionOutcome
from tests.workflows.test_approval import wait_for_state

from .conftest import K1
from .test_rotation import TOOLS, first_workflow_task_failure

CODE = "a = slow_step(3, 0)\nr = transfer('carol', a)\n[a, r['to']]"


async def test_an_approval_this_worker_cannot_read_waits_for_one_that_can(keyed_client, task_queue) -> None:
    registry = ToolRegistry.from_module(TOOLS)
    plain = await keyed_client(None)
    async with CodeModeWorker(plain, registry, task_queue=task_queue).running():
        handle = await start_execution(plain, CodeExecutionRequest(code=CODE), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        (pending,) = status.pending_approvals
        keyed = await keyed_client(K1)
        await keyed.get_workflow_handle(handle.id).signal("approve", ApproveSignal(call_id=pending.call_id, by="ana"))
        message = await first_workflow_task_failure(plain, handle.id)
    assert "Failed decoding the approve signal's input, encoding binary/encrypted (encrypted: this worker" in message
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    async with CodeModeWorker(keyed, registry, task_queue=task_queue).running():
        outcome = await asyncio.wait_for(keyed.get_workflow_handle(handle.id, result_type=ExecutionOutcome).result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == [30, "carol"]
    audit = await fetch_audit(keyed, handle.id)
    (call,) = [c for c in audit.calls if c.approval is not None]
    assert (call.approval.decision, call.approval.by) == ("approved", "ana")
