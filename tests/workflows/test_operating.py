"""Operating a run: what waits for a person is visible without a worker (memo), mistyped
decisions are recorded as ignored with why, decisions by number / with no id / through the
``decide`` Update, cancellation of a parked and of a running execution, and the state words
everywhere (status query, search attribute, history)."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import CancelledError

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import SA_STATUS, CodeExecutionRequest, Decision, ExecutionStatus

from .conftest import TOOLS_MODULE, read_events
from .test_approval import wait_for_state

TRANSFER = "r = transfer('bob', 5)\nr['to']"
STATUS = SearchAttributeKey.for_keyword(SA_STATUS)


async def _indexed_state(handle) -> str | None:
    for _ in range(100):  # visibility is updated asynchronously
        desc = await handle.describe()
        value = desc.typed_search_attributes.get(STATUS)
        if value is not None:
            return value
        await asyncio.sleep(0.1)
    return None


async def test_parked_run_shows_how_to_approve_with_no_worker(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        await wait_for_state(handle, "awaiting_approval")
        details = (await handle.describe()).raw_description  # noqa: F841 - describe works with a worker too
    # No worker now: describe (what the web UI shows) still says what waits and how to decide.
    memo = await (await handle.describe()).memo()
    (entry,) = memo["pending_approvals"]
    assert entry["tool"] == "transfer" and entry["call_id"] == "1"
    assert entry["summary"] == "transfer(to='bob', amount=5)"
    assert entry["approve_command"] == f"codemode approve {handle.id} 1"
    assert entry["deny_command"] == f"codemode deny {handle.id} 1"
    assert entry["signal_input"] == {"call_id": "1", "by": "your name"}
    assert await _indexed_state(handle) == "awaiting_approval"
    # Decide by number, as a person typing JSON into the UI would.
    await handle.signal("approve", {"call_id": 1, "by": "ana"})
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        outcome = await handle.result()
        meta = await handle.query("__temporal_workflow_metadata")
    assert outcome.success and outcome.output == "bob"
    assert outcome.tool_calls[0].approval.by == "ana"
    assert "pending_approvals" not in await (await handle.describe()).memo()
    assert meta.current_details.startswith("**Completed**")


async def test_mistyped_decisions_are_recorded_as_ignored(client, task_queue, worker, events_file) -> None:
    code = "import asyncio\nawait asyncio.gather(wire('bob', 1), wire('eve', 2))"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    status = await wait_for_state(handle, "awaiting_approval")
    for _ in range(50):
        if len(status.pending_approvals) == 2:
            break
        status = await handle.query("status", result_type=ExecutionStatus)
        await asyncio.sleep(0.1)
    await handle.signal("approve", {"call_id": "99", "by": "ana"})  # no such call
    await handle.signal("approve", {"callid": "1", "by": "ana"})  # a typo'd key
    await handle.signal("approve", {"by": "ana"})  # no id, and two calls pending
    for _ in range(50):
        status = await handle.query("status", result_type=ExecutionStatus)
        if len(status.ignored_signals) == 3:
            break
        await asyncio.sleep(0.1)
    reasons = [s.reason for s in status.ignored_signals]
    assert reasons[0] == "call 99 is not waiting for a decision (pending: 1, 2)"
    assert reasons[1].startswith("unknown field(s) 'callid'")
    assert reasons[2] == "no call_id given and 2 calls are pending (pending: 1, 2)"
    assert status.state == "awaiting_approval"
    # The Update answers at once: refused (no history event) or the recorded decision.
    with pytest.raises(WorkflowUpdateFailedError):
        await handle.execute_update("decide", Decision(call_id="7", approve=True, by="ana"))
    record = await handle.execute_update("decide", Decision(call_id="2", approve=False, by="ana", comment="no"))
    assert record["decision"] == "denied" and record["by"] == "ana"
    await handle.signal("approve", None)  # now exactly one call waits: no id needed
    outcome = await handle.result()
    assert not outcome.success  # the denial raised PermissionError in the code
    by_id = {c.call_id: c for c in outcome.tool_calls}
    assert by_id["1"].status == "ok" and by_id["1"].approval.by == "anonymous"
    assert by_id["2"].status == "denied" and by_id["2"].approval.comment == "no"
    lines = display.audit_lines(await fetch_audit(client, handle.id))
    ignored = [ln for ln in lines if "signal ignored" in ln]
    assert len(ignored) == 3 and "call 99 is not waiting" in ignored[0]
    assert any("approved by anonymous (sent by" in ln for ln in lines)
    assert any("denied by ana: no" in ln for ln in lines)
    assert await _indexed_state(handle) == "failed"


async def test_cancel_a_parked_run(client, task_queue, worker, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
    await wait_for_state(handle, "awaiting_approval")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert isinstance(caught.value.cause, CancelledError)
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.CANCELED
    assert await _indexed_state(handle) == "cancelled"
    assert "pending_approvals" not in await desc.memo()
    assert read_events(events_file) == []  # the tool never ran


async def test_cancel_a_running_python_run_closes_its_sandbox(client, task_queue, events_file) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    worker = CodeModeWorker(client, registry, task_queue=task_queue)
    code = "a = slow_step(1, 0)\nb = await nap(30)\na + b"  # nap is async: the cancel stops it
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        for _ in range(200):  # wait until the second call is inside its tool
            if any(e["event"] == "start" and e["tool"] == "nap" for e in read_events(events_file)):
                break
            await asyncio.sleep(0.05)
        assert worker.sandbox.live_sessions == 1  # the CPython process waits for the result
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        for _ in range(100):
            if worker.sandbox.live_sessions == 0:
                break
            await asyncio.sleep(0.05)
        assert worker.sandbox.live_sessions == 0  # the release step closed the live process
    assert await _indexed_state(handle) == "cancelled"
    audit = await fetch_audit(client, handle.id)
    assert audit.status == "canceled"
    assert [c.status for c in audit.calls][:1] == ["ok"]


async def test_cancel_reaches_a_running_tool(client, task_queue, worker, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code="await nap(30)"), task_queue=task_queue)
    for _ in range(200):
        if read_events(events_file):
            break
        await asyncio.sleep(0.05)
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await handle.result()
    for _ in range(100):  # a heartbeat's answer brings the cancellation to the tool
        events = [e["event"] for e in read_events(events_file)]
        if "cancelled" in events:
            break
        await asyncio.sleep(0.1)
    assert events == ["start", "cancelled"]  # stopped where it awaited, 30 s early
    assert await _indexed_state(handle) == "cancelled"
