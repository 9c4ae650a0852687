"""With an approvers file, only signed decisions by the people a tool's rule allows count; the
rest are listed as ignored with why, and the run keeps waiting (issue 37). Real dev server,
real worker, real Ed25519 keys."""

from __future__ import annotations

import pytest
from temporalio.client import WorkflowUpdateFailedError

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_runs
from codemode.client.histories.verify import verify_runs
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApprovalRecord, ApproveSignal, CodeExecutionRequest, Decision

from .conftest import TOOLS_MODULE, read_events
from .helpers import Person, people_toml, replay_and_keep, status_of, wait_ignored, wait_parked, write_file

TRANSFER = "r = transfer('bob', 12.5)\nr['to']"


def worker_with(client, task_queue, approvers) -> CodeModeWorker:
    return CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, approvers=approvers)


async def decide(handle, decision: Decision) -> ApprovalRecord:
    return await handle.execute_update("decide", decision, result_type=ApprovalRecord)


async def test_only_signed_allowed_decisions_count(client, task_queue, tmp_path, events_file) -> None:
    ana, bob, eve = Person("ana"), Person("bob"), Person("eve")
    text = people_toml((ana, ["finance"]), (bob, [])) + '\n[tools.transfer]\napprovers = ["group:finance"]\n'
    path = write_file(tmp_path / "approvers.toml", text)
    async with worker_with(client, task_queue, path).running():
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        xid = handle.id
        # 1. a raw signal, no signature
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, by="ana"))
        # 2. the Update, no signature: refused with the reason, and listed
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await decide(handle, Decision(call_id=call.call_id, approve=True, by="ana"))
        assert "unsigned" in str(refused.value.cause)
        # 3. a key the file does not list
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=eve.sign(xid, call)))
        # 4. a listed person the tool's rule does not allow
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=bob.sign(xid, call)))
        # 5. ana, over other arguments
        over_other = ana.sign(xid, call, args=["mallory", 12.5])
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=over_other))
        # 6. ana's decision for another call (and another execution), replayed onto this one
        other_call = ana.sign(xid, call, call_id="7")
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=other_call))
        other_exec = ana.sign("exec-elsewhere", call)
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=other_exec))
        # 7. a forged signature: ana's claims, bytes altered
        genuine = ana.sign(xid, call)
        forged = genuine.model_copy(
            update={
                "signature": genuine.signature[:8]
                + ("A" if genuine.signature[8] != "A" else "B")
                + genuine.signature[9:]
            }
        )
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=forged))
        status = await wait_ignored(handle, 8)
        assert status.state == "awaiting_approval" and [p.call_id for p in status.pending_approvals] == [call.call_id]
        reasons = [i.reason for i in status.ignored_signals]
        assert reasons[0].startswith("unsigned") and reasons[1].startswith("unsigned")
        assert "does not list" in reasons[2]
        assert reasons[3] == "bob may not decide transfer (rule tools.transfer allows: group:finance)"
        assert reasons[4] == "signed over other arguments than the ones this decision approves"
        assert "signed for call 7, not call" in reasons[5]
        assert "signed for execution exec-elsewhere" in reasons[6]
        assert "does not verify" in reasons[7]
        assert read_events(events_file) == []  # the tool never ran
        # A properly signed decision completes it (through the Update: the record comes back).
        good = ana.sign(xid, call)
        record = await decide(handle, Decision(call_id=call.call_id, approve=True, by="whoever", signature=good))
        assert record.decision == "approved" and record.by == "ana" and record.rule == "tools.transfer"
        outcome = await handle.result()
        await replay_and_keep(client, handle, "refused_then_signed")
    assert outcome.success and outcome.output == "bob"
    (rec,) = outcome.tool_calls
    assert rec.approval is not None and rec.approval.by == "ana"
    (sig,) = rec.approval.signatures
    assert (sig.signer, sig.key, sig.call_id) == ("ana", ana.public, call.call_id)
    assert len(read_events(events_file)) == 1


async def test_two_distinct_approvers_and_four_eyes(client, task_queue, tmp_path, events_file) -> None:
    ana, bob, cy = Person("ana"), Person("bob"), Person("cy")
    text = people_toml((ana, ["finance"]), (bob, ["finance"]), (cy, ["finance"]))
    text += '\n[tools.transfer]\napprovers = ["group:finance"]\nrequired = 2\nfour_eyes = true\n'
    path = write_file(tmp_path / "approvers.toml", text)
    async with worker_with(client, task_queue, path).running():
        request = CodeExecutionRequest(code=TRANSFER, started_by="cy")
        handle = await start_execution(client, request, task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        xid = handle.id
        # four eyes: cy started the run
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=cy.sign(xid, call)))
        first = await decide(
            handle, Decision(call_id=call.call_id, approve=True, by="ana", signature=ana.sign(xid, call))
        )
        assert first.decision == "counted" and first.needed == 1 and first.by == "ana"
        # ana again (a fresh signature): does not count twice
        with pytest.raises(WorkflowUpdateFailedError) as twice:
            await decide(handle, Decision(call_id=call.call_id, approve=True, by="ana", signature=ana.sign(xid, call)))
        assert "ana already decided" in str(twice.value.cause)
        status = await status_of(handle)
        assert status.state == "awaiting_approval"
        reasons = [i.reason for i in status.ignored_signals]
        assert reasons[0] == "four eyes: cy started this run and may not decide its calls (rule tools.transfer)"
        assert "ana already decided" in reasons[1]
        desc = await handle.describe()
        (entry,) = await desc.memo_value("pending_approvals")
        assert entry["approved_by"] == ["ana"] and entry["required"] == 2
        assert read_events(events_file) == []
        second = await decide(
            handle, Decision(call_id=call.call_id, approve=True, by="bob", signature=bob.sign(xid, call))
        )
        assert second.decision == "approved" and second.by == "ana, bob"
        outcome = await handle.result()
        await replay_and_keep(client, handle, "two_approvers")
    assert outcome.success
    approval = outcome.tool_calls[0].approval
    assert approval is not None and [s.signer for s in approval.signatures] == ["ana", "bob"]
    assert len(read_events(events_file)) == 1


async def test_policy_decides_one_call_and_asks_for_another(client, task_queue, tmp_path, events_file) -> None:
    ana = Person("ana")
    text = people_toml((ana, []))
    text += '\n[tools.transfer]\napprovers = ["ana"]\n'
    text += (
        '\n[[policy]]\nname = "own-domain"\ntool = "transfer"\ndecision = "allow"\n'
        'when = { to = { endswith = "@ourco.com" }, amount = { le = 100 } }\nreason = "our own accounts"\n'
        '\n[[policy]]\nname = "blocked"\ntool = "transfer"\ndecision = "deny"\nwhen = { to = "mallory" }\n'
    )
    path = write_file(tmp_path / "approvers.toml", text)
    code = (
        "a = transfer('ops@ourco.com', 10)['to']\n"
        "try:\n    transfer('mallory', 1)\n    b = 'sent'\nexcept PermissionError as e:\n    b = str(e)\n"
        "c = transfer('x@else.com', 10)['to']\n[a, b, c]"
    )
    async with worker_with(client, task_queue, path).running():
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        status = await wait_parked(handle)
        (call,) = status.pending_approvals
        assert call.args == ["x@else.com", 10]  # the first two never waited for a person
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=ana.sign(handle.id, call)))
        outcome = await handle.result()
        await replay_and_keep(client, handle, "policy")
    assert outcome.success, outcome.error
    assert outcome.output[0] == "ops@ourco.com" and outcome.output[2] == "x@else.com"
    assert "denied by policy.blocked" in outcome.output[1]
    allowed, denied, asked = (c.approval for c in outcome.tool_calls)
    assert allowed is not None and (allowed.decision, allowed.rule, allowed.by) == (
        "approved",
        "policy.own-domain",
        "policy.own-domain",
    )
    assert allowed.comment == "our own accounts" and not allowed.signatures
    assert denied is not None and (denied.decision, denied.rule) == ("denied", "policy.blocked")
    assert asked is not None and (asked.rule, asked.by) == ("tools.transfer", "ana") and asked.signatures
    assert len(read_events(events_file)) == 2  # the allowed one and the approved one ran


async def test_without_a_file_decisions_are_taken_as_before(client, task_queue, events_file) -> None:
    async with worker_with(client, task_queue, None).running():
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, by="alice"))
        outcome = await handle.result()
    assert outcome.success and outcome.tool_calls[0].approval.by == "alice"


async def test_the_code_review_needs_a_signature_too(client, task_queue, tmp_path) -> None:
    ana, bob = Person("ana"), Person("bob")
    text = people_toml((ana, []), (bob, [])) + '\n[defaults.code]\napprovers = ["ana"]\n'
    path = write_file(tmp_path / "approvers.toml", text)
    async with worker_with(client, task_queue, path).running():
        request = CodeExecutionRequest(code="lookup('Rome')", require_code_approval=True)
        handle = await start_execution(client, request, task_queue=task_queue)
        (review,) = (await wait_parked(handle)).pending_approvals
        assert review.call_id == "code"
        await handle.signal("approve", ApproveSignal(call_id="code", by="ana"))
        await handle.signal("approve", ApproveSignal(call_id="code", signature=bob.sign(handle.id, review)))
        status = await wait_ignored(handle, 2)
        assert status.state == "awaiting_approval"
        assert "unsigned" in status.ignored_signals[0].reason
        assert status.ignored_signals[1].reason == "bob may not decide <code> (rule defaults.code allows: ana)"
        await handle.signal("approve", ApproveSignal(call_id="code", signature=ana.sign(handle.id, review)))
        outcome = await handle.result()
    assert outcome.success and outcome.output == {"city": "Rome"}
    # --verify finds the review's decision in the history (the outcome has no record of it)
    runs, _ = await fetch_runs(client, handle.id)
    checked = await verify_runs(handle.id, runs, client.data_converter)
    (review_check,) = checked.decisions
    assert (review_check.call_id, review_check.signers, review_check.ok) == ("code", ["ana"], True), review_check
