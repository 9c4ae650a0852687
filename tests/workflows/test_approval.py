"""Approvals: a run parks holding nothing live, survives its worker, and resumes on a signal."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.worker.binaries import test_server_path
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, DenySignal, ExecutionStatus

from .conftest import TOOLS_MODULE, read_events

TRANSFER = "r = transfer('bob', 12.5)\nr['to']"


async def wait_for_state(handle, state: str, timeout: float = 30.0) -> ExecutionStatus:
    for _ in range(int(timeout / 0.1)):
        status = await handle.query("status", result_type=ExecutionStatus)
        if status.state == state:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"never reached {state}: {status}")


async def test_approval_survives_worker_restart(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    first = CodeModeWorker(client, registry, task_queue=task_queue)
    async with first.running():
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        (pending,) = status.pending_approvals
        assert pending.tool == "transfer" and pending.args == ["bob", 12.5]
        assert first.sandbox.live_sessions == 0  # nothing live while parked
    desc = await handle.describe()
    assert desc.search_attributes["CodeModeStatus"] == ["awaiting_approval"]
    # No worker at all now: the approval lands in the history.
    await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="alice", comment="ok"))
    assert read_events(events_file) == []
    second = CodeModeWorker(client, registry, task_queue=task_queue)
    async with second.running():
        outcome = await handle.result()
    assert outcome.success and outcome.output == "bob"
    (call,) = outcome.tool_calls
    assert call.approval is not None and (call.approval.decision, call.approval.by) == ("approved", "alice")
    assert call.result["ref"] == f"{handle.id}/{call.call_id}"
    assert len(read_events(events_file)) == 1


async def test_denial_raises_permission_error_in_code(client, task_queue, worker, events_file) -> None:
    code = "try:\n    transfer('eve', 1000)\n    r = 'sent'\nexcept PermissionError as e:\n    r = 'refused: ' + str(e)\nr"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    status = await wait_for_state(handle, "awaiting_approval")
    await handle.signal("deny", DenySignal(call_id=status.pending_approvals[0].call_id, by="bob", reason="too much"))
    outcome = await handle.result()
    assert outcome.success
    assert outcome.output == "refused: transfer(to='eve', amount=1000) was denied by bob: too much"
    assert outcome.tool_calls[0].status == "denied"
    assert read_events(events_file) == []  # the tool never ran


async def test_code_approval_parks_before_running(client, task_queue, worker) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code="lookup('Paris')", require_code_approval=True), task_queue=task_queue
    )
    status = await wait_for_state(handle, "awaiting_approval")
    (review,) = status.pending_approvals
    assert review.call_id == "code" and review.args == ["lookup('Paris')"]
    assert status.tool_calls == []
    await handle.signal("approve", ApproveSignal(call_id="code", by="carol"))
    outcome = await handle.result()
    assert outcome.success and outcome.output == {"city": "Paris"}


async def test_seven_day_approval_timeout_on_time_skipping_server(converter) -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=test_server_path(), data_converter=converter
    )
    async with env:
        registry = ToolRegistry.from_module(TOOLS_MODULE)
        worker = CodeModeWorker(env.client, registry, task_queue="ts")
        code = "try:\n    transfer('bob', 1)\nexcept PermissionError as e:\n    r = str(e)\nr"
        async with worker.running():
            request = CodeExecutionRequest(code=code, approval_timeout=timedelta(days=7))
            handle = await start_execution(env.client, request, task_queue="ts")
            outcome = await handle.result()  # the server skips the seven days
        assert outcome.success
        assert outcome.output == "transfer(to='bob', amount=1) was not approved in time"
        assert outcome.tool_calls[0].status == "timed_out"
        assert outcome.tool_calls[0].approval.decision == "timed_out"
        assert outcome.duration_ms >= timedelta(days=7).total_seconds() * 1000
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_checkpoint_from_another_monty_version_is_replayed(client, task_queue, events_file, monkeypatch) -> None:
    """A run parked under one Monty version and resumed by a worker with another: the
    snapshot is refused and the run is rebuilt by journal replay, no tool running twice."""
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    code = "a = slow_step(3, 0.01)\nprint('a', a)\nr = transfer('bob', a)\n[a, r['to']]"
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
    monkeypatch.setattr("codemode.runtimes.monty.MONTY_VERSION", "0.0.0-another-version")
    await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [30, "bob"] and outcome.stdout == "a 30\n"
    starts = [(e["tool"], e["attempt"]) for e in read_events(events_file) if e["event"] == "start"]
    assert starts == [("slow_step", 1), ("transfer", 1)]
