"""Undo under an approvers file (issue 47): "deny and roll back" is signed like any decision, and
the signature must say so; a compensation that asks a person parks, and completes after a signed
decision under its rule (four-eyes included: the run's starter may not approve it). Real dev
server, real worker, real Ed25519 keys."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateStage

from codemode.activities import ToolRegistry
from codemode.activities.approval_gate import ApproverActivities
from codemode.approvals.gate import GateInput
from codemode.approvals.signing import sign_start
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_runs
from codemode.client.histories.verify import verify_runs
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApprovalRecord, CodeExecutionRequest, Decision, ExecutionStatus, RollbackRequest

from .helpers import Person, people_toml, status_of, wait_parked, write_file

UNDO_TOOLS = "tests.workflows.undo_tools"


def worker_with(client, task_queue, approvers) -> CodeModeWorker:
    return CodeModeWorker(client, ToolRegistry.from_module(UNDO_TOOLS), task_queue=task_queue, approvers=approvers)


async def decide(handle, decision: Decision) -> ApprovalRecord:
    return await handle.execute_update("decide", decision, result_type=ApprovalRecord)


async def test_deny_and_roll_back_is_signed_as_such(client, task_queue, tmp_path, events_file) -> None:
    ana = Person("ana")
    path = write_file(tmp_path / "approvers.toml", people_toml((ana, [])))
    async with worker_with(client, task_queue, path).running():
        code = "transfer('ann', 1)\npayout('bo', 2)"
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        assert call.signed and call.can_undo
        # A plain denial's signature does not carry a rollback, nor the other way round.
        plain = ana.sign(handle.id, call, "deny")
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(
                handle, Decision(call_id=call.call_id, approve=False, by="ana", signature=plain, rollback=True)
            )
        assert "signed as a plain deny, sent as deny and roll back" in str(refused.value.cause)
        rolling = ana.sign(handle.id, call, "deny", rollback=True)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, Decision(call_id=call.call_id, approve=False, by="ana", signature=rolling))
        assert "signed as deny and roll back, sent as a plain deny" in str(refused.value.cause)
        record = await decide(
            handle, Decision(call_id=call.call_id, approve=False, by="ana", signature=rolling, rollback=True)
        )
        assert record.decision == "denied" and record.rollback and record.signatures[0].rollback
        outcome = await asyncio.wait_for(handle.result(), 60)
        assert [(e.tool, e.state) for e in outcome.undo.entries] == [("transfer", "compensated")]
        assert outcome.undo.rollback.trigger == "deny" and outcome.undo.rollback.by == "ana"
        runs, _ = await fetch_runs(client, handle.id)
        verified = await verify_runs(handle.id, runs, client.data_converter)
        assert verified.ok, verified


async def test_a_compensation_that_asks_waits_for_a_signed_decision(client, task_queue, tmp_path, events_file) -> None:
    ana, bob = Person("ana"), Person("bob")
    text = (
        people_toml((ana, ["ops"]), (bob, ["ops"]))
        + '\n[tools."compensate:order"]\napprovers = ["group:ops"]\nfour_eyes = true\n'
    )
    path = write_file(tmp_path / "approvers.toml", text)
    async with worker_with(client, task_queue, path).running():
        # ana starts it, proven by her key (issue 45: four eyes trusts only a signed start; an
        # unsigned one would make the compensation need one approver more).
        xid, code = f"exec-{uuid.uuid4().hex[:12]}", "order('lamp')\nask('more?')"
        start = sign_start(ana.key, signer="ana", execution_id=xid, code=code)
        request = CodeExecutionRequest(code=code, started_by="ana", start_signature=start)
        handle = await start_execution(client, request, task_queue=task_queue, execution_id=xid)
        await wait_parked(handle)
        await handle.start_update("rollback", RollbackRequest(by="ana"), wait_for_stage=WorkflowUpdateStage.ACCEPTED)
        for _ in range(300):
            status: ExecutionStatus = await status_of(handle)
            if [p.call_id for p in status.pending_approvals] == ["undo-1"]:
                break
            await asyncio.sleep(0.1)
        (undo,) = status.pending_approvals
        assert undo.signed and undo.tool == "compensate:order"
        # Four eyes: ana started the run, so her approval of its compensation does not count.
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(
                handle, Decision(call_id="undo-1", approve=True, by="ana", signature=ana.sign(handle.id, undo))
            )
        assert "four eyes" in str(refused.value.cause)
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, Decision(call_id="undo-1", approve=True, by="bob"))
        assert "unsigned" in str(refused.value.cause)
        record = await decide(
            handle, Decision(call_id="undo-1", approve=True, by="bob", signature=bob.sign(handle.id, undo))
        )
        assert record.decision == "approved" and record.rule == "tools.compensate:order"
        outcome = await asyncio.wait_for(handle.result(), 60)
    (entry,) = outcome.undo.entries
    assert entry.state == "compensated" and entry.approval is not None and entry.approval.by == "bob"
    runs, _ = await fetch_runs(client, handle.id)
    verified = await verify_runs(handle.id, runs, client.data_converter)
    assert verified.ok, verified
    assert [(d.call_id, d.decision, d.signers) for d in verified.decisions if d.call_id == "undo-1"] == [
        ("undo-1", "approved", ["bob"])
    ]


async def test_a_compensation_without_a_rule_of_its_own_is_decided_by_its_tools(tmp_path) -> None:
    ana = Person("ana")
    text = people_toml((ana, ["finance"])) + '\n[tools.transfer]\napprovers = ["group:finance"]\nrequired = 2\n'
    gate = ApproverActivities(write_file(tmp_path / "approvers.toml", text), ToolRegistry.from_module(UNDO_TOOLS))
    refund = await gate.gate(GateInput(execution_id="x", call_id="undo-1", tool="compensate:transfer", args=["a", 1]))
    assert (refund.tool, refund.rule, refund.required) == ("compensate:transfer", "tools.transfer", 2)
    other = await gate.gate(GateInput(execution_id="x", call_id="undo-2", tool="compensate:order", args=["lamp"]))
    assert other.rule != "tools.transfer" and other.required == 1
