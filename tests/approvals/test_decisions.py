"""Decisions beyond yes or no, through the workflow: edit the arguments then approve, answer
instead of the tool, deny with a reason; bad edits and answers refused before anything runs."""

from __future__ import annotations

import asyncio

import pytest

from codemode.client.executions import start_execution
from codemode.client.following import DecisionRefused, send_decision
from codemode.workflows.models import Answer, CodeExecutionRequest, Decision, ExecutionStatus

from .conftest import read_events

SEND = "r = send_money('bob', 900)\n[r['to'], r['amount']]"


async def parked(handle, count: int = 1) -> ExecutionStatus:
    for _ in range(300):
        status = await handle.query("status", result_type=ExecutionStatus)
        if len(status.pending_approvals) >= count:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"never parked: {status}")


async def test_edit_then_approve_runs_the_approved_arguments(client, task_queue, worker, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    assert pending.arguments == {"to": "bob", "amount": 900}
    assert pending.parameters_schema["properties"]["amount"]["type"] == "number"
    # An edit that does not fit the tool is refused before anything is recorded.
    with pytest.raises(DecisionRefused, match="amount"):
        await send_decision(
            handle, Decision(call_id=pending.call_id, approve=True, by="ann", arguments={"amount": "lots"})
        )
    with pytest.raises(DecisionRefused, match="unknown argument"):
        await send_decision(handle, Decision(call_id=pending.call_id, approve=True, by="ann", arguments={"cc": "x"}))
    record = await send_decision(
        handle, Decision(call_id=pending.call_id, approve=True, by="ann", arguments={"amount": 90}, door="cli")
    )
    assert record is not None and record.approved_arguments == {"to": "bob", "amount": 90}
    outcome = await handle.result()
    assert outcome.success and outcome.output == ["bob", 90]
    assert [(e["tool"], e["amount"]) for e in read_events(events_file)] == [("send_money", 90)]
    (call,) = outcome.tool_calls
    assert call.approval.asked_arguments == {"to": "bob", "amount": 900}
    assert call.approval.approved_arguments == {"to": "bob", "amount": 90}
    assert (call.approval.by, call.approval.door) == ("ann", "cli")
    # A decision on a call already decided: refused, nothing applied twice.
    with pytest.raises(DecisionRefused):
        await send_decision(handle, Decision(call_id=pending.call_id, approve=True, by="ann"))


async def test_answer_instead_of_the_tool(client, task_queue, worker, events_file) -> None:
    code = "r = send_money('bob', 900)\n[r['to'], r['amount'], isinstance(r['amount'], float)]"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    with pytest.raises(DecisionRefused, match="answer"):
        await send_decision(handle, Decision(call_id=pending.call_id, approve=True, by="ann", answer=Answer(value=42)))
    await send_decision(
        handle,
        Decision(call_id=pending.call_id, approve=True, by="ann", answer=Answer(value={"to": "carl", "amount": 1})),
    )
    outcome = await handle.result()
    # The answer is converted to what the tool returns (Receipt.amount is a float): 1 -> 1.0.
    assert outcome.success and outcome.output == ["carl", 1.0, True]
    assert read_events(events_file) == []  # the tool never ran
    (call,) = outcome.tool_calls
    assert call.approval.answered and call.status == "ok" and call.result == {"to": "carl", "amount": 1.0}
    assert isinstance(call.result["amount"], float)


async def test_deny_with_a_reason_reaches_the_code(client, task_queue, worker, events_file) -> None:
    code = "try:\n    send_money('eve', 5)\n    r = 'sent'\nexcept PermissionError as e:\n    r = str(e)\nr"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    with pytest.raises(DecisionRefused, match="denial"):
        await send_decision(handle, Decision(call_id=pending.call_id, approve=False, by="bo", arguments={"amount": 1}))
    await send_decision(handle, Decision(call_id=pending.call_id, approve=False, by="bo", comment="not eve"))
    outcome = await handle.result()
    assert outcome.success and "denied by bo: not eve" in outcome.output
    assert read_events(events_file) == []


async def test_predicate_parks_one_call_and_runs_another(
    client, task_queue, worker, events_file, tmp_path, monkeypatch
):
    asked = tmp_path / "predicate.jsonl"
    monkeypatch.setenv("CODEMODE_TEST_PREDICATE", str(asked))
    code = "a = pay('ann', 20)\nb = pay('bob', 900)\n[a['amount'], b['amount']]"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    assert pending.arguments == {"to": "bob", "amount": 900}
    assert [e["to"] for e in read_events(events_file)] == ["ann"]  # ran without asking anyone
    await send_decision(handle, pending.call_id, approve=True, by="ann")
    outcome = await handle.result()
    assert outcome.output == [20, 900]
    assert [c.approval is not None for c in outcome.tool_calls] == [False, True]
    assert len(asked.read_text().splitlines()) == 2
