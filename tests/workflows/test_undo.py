"""Undo through the workflow (issue 47): compensations declared with the tool, the log of applied
calls, "deny and roll back", the rollback Update, ``on_failure="compensate"``, compensations that
fail and retry, and ones that ask a person. On Monty and the CPython runtime, a real dev server."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import (
    ApprovalRecord,
    CodeExecutionRequest,
    Decision,
    ExecutionStatus,
    RollbackRequest,
    UndoLog,
)

from .conftest import read_events
from .test_approval import wait_for_state

UNDO_TOOLS = "tests.workflows.undo_tools"

THREE_THEN_PAYOUT = """
a = transfer('ann', 10)
b = transfer('bob', 20)
c = transfer('cy', 30)
payout('dee', 40)
'paid'
"""


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("CODEMODE_TEST_LEDGER", str(path))
    return path


@pytest.fixture
async def undo_worker(client, task_queue: str) -> AsyncIterator[CodeModeWorker]:
    w = CodeModeWorker(client, ToolRegistry.from_module(UNDO_TOOLS), task_queue=task_queue)
    async with w.running():
        yield w


def compensations(events_file: Path, kind: str = "compensated") -> list[dict]:
    return [e for e in read_events(events_file) if e["event"] == kind]


async def parked(client, task_queue: str, code: str, **request) -> WorkflowHandle:
    """A run of ``code`` started and waiting for a decision (its last call asks a person)."""
    handle = await start_execution(client, CodeExecutionRequest(code=code, **request), task_queue=task_queue)
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    return handle


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_deny_and_roll_back_compensates_newest_first(
    client, task_queue, undo_worker, events_file, ledger, runtime
) -> None:
    request = CodeExecutionRequest(code=THREE_THEN_PAYOUT, runtime=runtime)
    handle = await start_execution(client, request, task_queue=task_queue)
    status = await wait_for_state(handle, "awaiting_approval", timeout=60)
    (pending,) = status.pending_approvals
    assert pending.tool == "payout" and pending.can_undo is True and pending.undo_label == "refund"
    assert [w.split(":")[0] for w in pending.would_compensate or []] == ["3", "2", "1"]
    assert status.undo is not None and [e.state for e in status.undo.entries] == ["applied"] * 3

    record = await handle.execute_update(
        "decide",
        Decision(call_id=pending.call_id, approve=False, by="ops", comment="wrong account", rollback=True),
        result_type=ApprovalRecord,
    )
    assert record.decision == "denied" and record.rollback
    outcome = await asyncio.wait_for(handle.result(), 90)

    assert not outcome.success
    assert outcome.error is not None and outcome.error.type == "PermissionError"
    assert "rolled back" in outcome.error.message and "ops" in outcome.error.message
    assert outcome.undo is not None
    assert [(e.call_id, e.state) for e in outcome.undo.entries] == [
        ("1", "compensated"),
        ("2", "compensated"),
        ("3", "compensated"),
    ]
    assert outcome.undo.rollback is not None and outcome.undo.rollback.trigger == "deny"
    assert outcome.undo.rollback.by == "ops" and outcome.undo.rollback.finished
    # Newest first, each once, under its own idempotency key.
    done = compensations(events_file)
    assert [e["to"] for e in done] == ["cy", "bob", "ann"]
    assert [e["key"] for e in done] == [f"{handle.id}/{c}/compensate" for c in ("3", "2", "1")]
    refunds = [line for line in ledger.read_text().splitlines() if '"refund"' in line]
    assert len(refunds) == 3
    desc = await handle.describe()
    assert desc.search_attributes["CodeModeStatus"] == ["rolled_back"]
    # The compensations are activities of their own, in the history.
    history = await handle.fetch_history()
    scheduled = [
        (
            e.activity_task_scheduled_event_attributes.activity_type.name,
            e.activity_task_scheduled_event_attributes.activity_id,
        )
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]
    assert [s for s in scheduled if s[0].startswith("compensate:")] == [
        ("compensate:transfer", "compensate-3"),
        ("compensate:transfer", "compensate-2"),
        ("compensate:transfer", "compensate-1"),
    ]
    # codemode history shows each compensation in the timeline, and the log.
    audit = await fetch_audit(client, handle.id)
    assert [ev.text for ev in audit.events if ev.kind == "undo"] == [
        f"compensated call {c} (transfer)" for c in ("3", "2", "1")
    ]
    assert audit.undo is not None and audit.undo.count("compensated") == 3
    lines = display.audit_lines(audit)
    assert any("↩ compensated call 3 (transfer)" in line for line in lines)
    assert any(line.strip().startswith("undo: denied and rolled back by ops: wrong account") for line in lines)


async def test_failing_compensations_do_not_stop_the_others(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    handle = await parked(client, task_queue, "hold('a')\nlock('b')\nnote('c')\ntransfer('d', 1)\nask('go?')")
    await handle.start_update("rollback", RollbackRequest(by="ops", reason="stop"), wait_for_stage=_accepted())
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.undo is not None
    states = {e.tool: e for e in outcome.undo.entries}
    assert states["transfer"].state == "compensated"
    assert states["note"].state == "nothing_to_do"
    assert states["lock"].state == "failed" and states["lock"].error is not None
    assert states["lock"].error.type == "RuntimeError" and "cannot be released" in states["lock"].error.message
    assert states["lock"].attempts == 2
    assert states["hold"].state == "compensated" and states["hold"].attempts == 3
    assert outcome.error is not None and outcome.error.type == "RolledBack"
    tries = [e["tool"] for e in compensations(events_file, "compensate")]
    assert tries == ["transfer", "note", "lock", "lock", "hold", "hold", "hold"]
    assert outcome.tool_calls[-1].status == "cancelled"  # the waiting call was withdrawn
    assert outcome.tool_calls[-1].approval is not None and outcome.tool_calls[-1].approval.decision == "withdrawn"


def _accepted():
    from temporalio.client import WorkflowUpdateStage

    return WorkflowUpdateStage.ACCEPTED


async def test_on_failure_compensate_after_an_uncaught_error(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    code = "transfer('ann', 1)\ntransfer('bob', 2)\nlookup('x')\n1 / 0"
    request = CodeExecutionRequest(code=code, on_failure="compensate")
    outcome = await asyncio.wait_for(run(client, request, task_queue), 90)
    assert not outcome.success and outcome.error is not None and outcome.error.type == "ZeroDivisionError"
    assert outcome.undo is not None and outcome.undo.rollback is not None
    assert outcome.undo.rollback.trigger == "on_failure"
    assert [e.state for e in outcome.undo.entries] == ["compensated", "compensated"]
    assert [e["to"] for e in compensations(events_file)] == ["bob", "ann"]
    # Without it, a failure keeps what the calls did.
    keep = await asyncio.wait_for(run(client, CodeExecutionRequest(code=code), task_queue), 60)
    assert keep.undo is not None and [e.state for e in keep.undo.entries] == ["applied", "applied"]
    assert len(compensations(events_file)) == 2


async def test_on_failure_compensate_after_a_cancellation(client, task_queue, undo_worker, events_file, ledger) -> None:
    from temporalio.client import WorkflowFailureError

    handle = await parked(client, task_queue, "transfer('ann', 1)\nask('x')", on_failure="compensate")
    await handle.cancel()
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(handle.result(), 60)
    log = await handle.query("undo_log", result_type=UndoLog)  # answered from the closed run's history
    assert [e.state for e in log.entries] == ["compensated"]
    assert log.rollback is not None and log.rollback.trigger == "on_failure"
    assert [e["to"] for e in compensations(events_file)] == ["ann"]


async def test_a_parallel_rollback_schedules_every_compensation_at_once(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    handle = await parked(client, task_queue, "transfer('ann', 1)\ntransfer('bob', 2)\ntransfer('cy', 3)\nask('x')")
    await handle.execute_update("rollback", RollbackRequest(by="ops", order="parallel"))
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert [e.state for e in outcome.undo.entries] == ["compensated"] * 3 and outcome.undo.rollback.order == "parallel"
    assert sorted(e["to"] for e in compensations(events_file)) == ["ann", "bob", "cy"]
    # All three were scheduled before any of them completed.
    ids: set[int] = set()
    kinds = []
    for e in (await handle.fetch_history()).events:
        scheduled = e.activity_task_scheduled_event_attributes
        if e.HasField("activity_task_scheduled_event_attributes") and scheduled.activity_type.name.startswith(
            "compensate:"
        ):
            ids.add(e.event_id)
            kinds.append("scheduled")
        elif e.activity_task_completed_event_attributes.scheduled_event_id in ids:
            kinds.append("completed")
    assert kinds == ["scheduled"] * 3 + ["completed"] * 3


async def run(client, request, task_queue):
    handle = await start_execution(client, request, task_queue=task_queue)
    return await handle.result()


async def test_rollback_of_an_ended_run_is_a_run_of_its_own(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    from codemode.client.undo import roll_back

    code = "transfer('ann', 1)\ntransfer('bob', 2)\n'done'"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success and outcome.undo is not None
    assert [e.state for e in outcome.undo.entries] == ["applied", "applied"]
    first = await asyncio.wait_for(roll_back(client, handle.id, by="ops", reason="undo the test"), 90)
    assert first.success, first.error
    assert first.execution_id == f"rollback:{handle.id}"
    assert first.undo is not None and [e.state for e in first.undo.entries] == ["compensated", "compensated"]
    assert first.undo.of_execution == handle.id
    done = compensations(events_file)
    assert [e["key"] for e in done] == [f"{handle.id}/2/compensate", f"{handle.id}/1/compensate"]
    # Again: nothing is compensated twice.
    again = await asyncio.wait_for(roll_back(client, handle.id, by="ops"), 90)
    assert again.success and [e.state for e in again.undo.entries] == ["compensated", "compensated"]
    assert len(compensations(events_file)) == 2


async def test_rollback_waits_for_a_compensation_that_asks_a_person(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    handle = await parked(client, task_queue, "order('lamp')\nask('more?')")
    await handle.start_update("rollback", RollbackRequest(by="ops"), wait_for_stage=_accepted())
    for _ in range(300):
        status = await handle.query("status", result_type=ExecutionStatus)
        if [p.call_id for p in status.pending_approvals] == ["undo-1"]:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the compensation never waited: {status}")
    (pending,) = status.pending_approvals
    assert pending.tool == "compensate:order" and pending.args == ["lamp"]
    assert compensations(events_file, "compensate") == []
    await handle.execute_update("decide", Decision(call_id="undo-1", approve=True, by="lead"))
    outcome = await asyncio.wait_for(handle.result(), 60)
    (entry,) = outcome.undo.entries
    assert entry.state == "compensated" and entry.approval is not None and entry.approval.by == "lead"
    assert len(compensations(events_file, "compensate")) == 1


async def test_undo_log_query_and_old_runs_refuse(client, task_queue, undo_worker, ledger) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code="transfer('a', 1)\nask('x')"), task_queue=task_queue
    )
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    log = await handle.query("undo_log", result_type=UndoLog)
    assert [(e.tool, e.state, e.result["to"]) for e in log.entries] == [("transfer", "applied", "a")]
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("rollback", RollbackRequest(by=" "))
    assert "by must not be empty" in str(refused.value.cause)
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("decide", Decision(call_id="2", approve=True, by="x", rollback=True))
    assert "rollback goes with a denial" in str(refused.value.cause)
    await handle.cancel()


def unique() -> str:
    return uuid.uuid4().hex[:6]


async def test_the_framework_adapters_core_rolls_back(client, task_queue, undo_worker, events_file, ledger) -> None:
    from codemode.integrations.run_code import RunCode

    core = RunCode(UNDO_TOOLS, client=client, task_queue=task_queue, id_prefix=f"undo-{unique()}")
    done = await asyncio.wait_for(core.outcome("transfer('ann', 1)\n'ok'", "call-1"), 60)
    assert done["success"] and done["undo"] == [
        {"call_id": "1", "summary": "transfer(to='ann', amount=1)", "state": "applied"}
    ]
    undone = await asyncio.wait_for(core.rollback(done["execution_id"], reason="by mistake"), 60)
    assert undone["success"] and [u["state"] for u in undone["undo"]] == ["compensated"]
    assert undone["execution_id"] == f"rollback:{done['execution_id']}"


async def test_large_results_are_kept_as_text_or_said_too_large(
    client, task_queue, undo_worker, events_file, ledger
) -> None:
    # 300 lines (~31 KB): passed on as JSON text, kept for the compensation; 1000 (~100 KB): too large.
    code = "receipt(300)\nreceipt(1000)\nask('x')"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    status = await wait_for_state(handle, "awaiting_approval", timeout=60)
    kept, dropped = status.undo.entries
    assert kept.state == "applied" and kept.result is None and kept.result_json is not None
    assert dropped.state == "cannot_undo" and "larger than" in (dropped.why or "")
    assert [w.split(":")[0] for w in status.pending_approvals[0].would_compensate] == ["1"]
    await handle.execute_update("rollback", RollbackRequest(by="ops"))
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert [e.state for e in outcome.undo.entries] == ["compensated", "cannot_undo"]
    assert [e["lines"] for e in compensations(events_file, "compensate")] == [300]
