"""Fail closed across workers, revocation now, and starters who lie (issue 45), on a real dev
server with real workers.

On main 85705d4, with ``codemode dev --approvers FILE`` and a plain ``codemode worker`` on the same
task queue, 3 of 6 unsigned ``approve`` signals naming a listed person ran the call, and
``history --verify`` marked those calls valid; a key removed from the file still counted for a
call already waiting; a starter who set ``CODEMODE_USER`` to someone else approved their own
run."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowUpdateFailedError

from codemode.activities import ToolRegistry, approvers_peers
from codemode.approvals import keys
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit, fetch_runs
from codemode.client.histories.verify import verify_runs
from codemode.client.signing import Signer
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApprovalRecord, ApproveSignal, CodeExecutionRequest, Decision

from .conftest import TOOLS_MODULE, read_events
from .helpers import Person, people_toml, replay_and_keep, status_of, wait_ignored, wait_parked, write_file

TRANSFER = "r = transfer('bob', 12.5)\nr['to']"
RUNS = 6


def worker(client, task_queue, approvers) -> CodeModeWorker:
    return CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, approvers=approvers)


async def other_client(client):
    """A client of its own: a second worker of the same task queue in this process needs one."""
    from codemode.worker.connection import connect, local_target

    return await connect(target=local_target(client.service_client.config.target_host))


async def _polling(client, task_queue: str, tag: str) -> None:
    """Until a worker whose identity says it reads the file tagged ``tag`` polls the queue."""
    for _ in range(300):
        if tag in (await approvers_peers.pollers(client, task_queue)).values():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no worker with approvers file {tag} polls {task_queue}")


async def test_a_worker_without_the_file_never_lets_an_unsigned_decision_through(
    client, task_queue, tmp_path, events_file
) -> None:
    ana = Person("ana")
    path = write_file(tmp_path / "approvers.toml", people_toml((ana, [])) + '\n[tools.transfer]\napprovers = ["ana"]\n')
    async with worker(client, task_queue, path).running():
        await _polling(client, task_queue, approvers_peers.tag_of_file(path))
        async with worker(await other_client(client), task_queue, None).running():  # a laptop worker, no file
            await _polling(client, task_queue, "none")
            assert await approvers_peers.differing(client, task_queue, "none")  # named: the one with a file
            handles = [
                await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
                for _ in range(RUNS)
            ]
            for handle in handles:
                (call,) = (await wait_parked(handle)).pending_approvals
                assert call.signed, "a worker without the file answered the gate"
                for by in ("ana", "anonymous", "ana"):
                    await handle.signal("approve", ApproveSignal(call_id=call.call_id, by=by))
            for handle in handles:
                status = await wait_ignored(handle, 3)
                assert status.state == "awaiting_approval"
                assert all(i.reason.startswith("unsigned") for i in status.ignored_signals)
            assert read_events(events_file) == []  # nothing moved
            for handle in handles:
                (call,) = (await status_of(handle)).pending_approvals
                await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=ana.sign(handle.id, call)))
            outcomes = [await asyncio.wait_for(h.result(), 120) for h in handles]
    assert all(o.success and o.tool_calls[0].approval.signatures for o in outcomes)
    assert len(read_events(events_file)) == RUNS
    runs, _ = await fetch_runs(client, handles[0].id)
    assert (await verify_runs(handles[0].id, runs, client.data_converter)).ok


async def test_verify_flags_a_run_checked_under_mixed_files(client, task_queue, tmp_path, events_file) -> None:
    """A run whose first call a worker without the file answered (nothing pinned yet: decided
    unsigned) and whose second call a worker with the file answered: --verify names the mix,
    and from the second call on the run refuses unsigned decisions."""
    ana = Person("ana")
    path = write_file(tmp_path / "approvers.toml", people_toml((ana, [])) + '\n[tools.transfer]\napprovers = ["ana"]\n')
    code = "a = transfer('bob', 1)['to']\nb = transfer('cy', 2)['to']\n[a, b]"
    async with worker(client, task_queue, None).running():
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (first,) = (await wait_parked(handle)).pending_approvals
        assert not first.signed
    async with worker(client, task_queue, path).running():
        await handle.signal("approve", ApproveSignal(call_id=first.call_id, by="ana"))  # taken: no file then
        for _ in range(300):
            pending = (await status_of(handle)).pending_approvals
            if pending and pending[0].call_id != first.call_id:
                break
            await asyncio.sleep(0.1)
        (second,) = pending
        assert second.signed  # pinned now
        await handle.signal("approve", ApproveSignal(call_id=second.call_id, by="ana"))
        assert (await wait_ignored(handle, 1)).ignored_signals[0].reason.startswith("unsigned")
        await handle.signal("approve", ApproveSignal(call_id=second.call_id, signature=ana.sign(handle.id, second)))
        outcome = await asyncio.wait_for(handle.result(), 60)
        await replay_and_keep(client, handle, "gen45-mixed", plain=True)
    assert outcome.output == ["bob", "cy"]
    runs, _ = await fetch_runs(client, handle.id)
    checked = await verify_runs(handle.id, runs, client.data_converter)
    assert not checked.ok and checked.problems
    assert "different approvers files" in checked.problems[0] and "no approvers file" in checked.problems[0]


async def test_a_key_removed_while_the_call_waits_no_longer_counts(client, task_queue, tmp_path, events_file) -> None:
    ana, bob, cy = Person("ana"), Person("bob"), Person("cy")
    rule = '\n[tools.transfer]\napprovers = ["group:finance"]\nrequired = 2\n'
    path = write_file(
        tmp_path / "approvers.toml", people_toml((ana, ["finance"]), (bob, ["finance"]), (cy, ["finance"])) + rule
    )
    async with worker(client, task_queue, path).running():
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        first = await _decide(handle, call, ana)
        assert first.decision == "counted" and first.needed == 1
        # ana's key leaks: retired while the call waits
        path.write_text(
            f'[people.ana]\nretired_keys = ["{ana.public}"]\ngroups = ["finance"]\n'
            + people_toml((bob, ["finance"]), (cy, ["finance"]))
            + rule
        )
        second = await _decide(handle, call, bob)
        assert second.decision == "counted" and second.by == "bob", second  # ana's approval no longer counts
        status = await status_of(handle)
        assert any("no longer counts" in i.reason and "ana" in i.reason for i in status.ignored_signals)
        await _refused(_decide(handle, call, ana), "retired key of ana")
        third = await _decide(handle, call, cy)
        assert third.decision == "approved" and third.by == "bob, cy"
        outcome = await handle.result()
        await replay_and_keep(client, handle, "gen45-revoked", plain=True)
    assert [s.signer for s in outcome.tool_calls[0].approval.signatures] == ["bob", "cy"]
    runs, _ = await fetch_runs(client, handle.id)
    checked = await verify_runs(handle.id, runs, client.data_converter)
    assert checked.ok, checked
    audit = await fetch_audit(client, handle.id)
    text = "\n".join(e.text for e in audit.events)
    assert "ana's approval of call 1 no longer counts" in text and "approved by bob, cy (signed)" in text


async def _refused(update, says: str) -> None:
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await update
    assert says in str(refused.value.cause), refused.value.cause


async def _decide(handle, call, person: Person) -> ApprovalRecord:
    sig = person.sign(handle.id, call, door="cli")
    decision = Decision(call_id=call.call_id, approve=True, by=person.name, door="cli", signature=sig)
    return await handle.execute_update("decide", decision, result_type=ApprovalRecord)


async def test_a_starter_who_lies_about_who_they_are_cannot_approve_alone(
    client, task_queue, tmp_path, monkeypatch, events_file
) -> None:
    """cy starts the run as CODEMODE_USER=ana (free text: no key proves it) and approves it: it
    counts as one of two. Started with cy's own key, cy is known and refused, and one other
    approver decides."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    ana, bob = Person("ana"), Person("bob")
    _, cy_public = keys.generate("cy")  # cy's keygen key: what start_execution signs a start with
    cy = Signer.load("cy")
    text = people_toml((ana, ["finance"]), (bob, ["finance"]))
    text += f'\n[people.cy]\nkeys = ["{cy_public}"]\ngroups = ["finance"]\n'
    text += '\n[tools.transfer]\napprovers = ["group:finance"]\nfour_eyes = true\n'
    path = write_file(tmp_path / "approvers.toml", text)
    async with worker(client, task_queue, path).running():
        monkeypatch.setenv("CODEMODE_USER", "ana")  # the lie
        handle = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        assert (await handle.describe()) is not None
        (call,) = (await wait_parked(handle)).pending_approvals
        own = cy.sign(handle.id, call, "approve", door="cli")
        counted = await handle.execute_update(
            "decide",
            Decision(call_id=call.call_id, approve=True, by="cy", door="cli", signature=own),
            result_type=ApprovalRecord,
        )
        assert counted.decision == "counted" and counted.needed == 1  # not decided by the starter alone
        await _refused(_decide(handle, call, ana), "this run says ana started it")
        decided = await _decide(handle, call, bob)
        assert decided.decision == "approved" and decided.by == "cy, bob"
        await handle.result()

        monkeypatch.setenv("CODEMODE_USER", "cy")  # the truth, proven by cy's key
        signed = await start_execution(client, CodeExecutionRequest(code=TRANSFER), task_queue=task_queue)
        (call,) = (await wait_parked(signed)).pending_approvals
        own = cy.sign(signed.id, call, "approve", door="cli")
        await _refused(
            signed.execute_update(
                "decide", Decision(call_id=call.call_id, approve=True, by="cy", door="cli", signature=own)
            ),
            "cy started this run",
        )
        alone = await _decide(signed, call, bob)
        assert alone.decision == "approved" and alone.by == "bob"
        await signed.result()
        await replay_and_keep(client, signed, "gen45-signed-start", plain=True)
    assert len(read_events(events_file)) == 2


async def test_a_worker_with_another_file_answers_nothing_for_a_pinned_run(
    client, task_queue, tmp_path, events_file
) -> None:
    """A run pinned file A. A worker whose file B allows transfers to cy without asking (and is
    not declared to supersede A) answers none of its gates: the second call neither runs nor is
    decided while B is the only worker, and B says why. Workers of the queue with different
    files are named. A file that lists A's hash in ``supersedes`` takes over."""
    import hashlib

    ana = Person("ana")
    a_text = people_toml((ana, [])) + '\n[tools.transfer]\napprovers = ["ana"]\n'
    looser = '\n[[policy]]\nname = "cy-ok"\ntool = "transfer"\ndecision = "allow"\nwhen = { to = "cy" }\n'
    a_path = write_file(tmp_path / "a.toml", a_text)
    b_path = write_file(tmp_path / "b.toml", a_text + looser)
    a_sha = hashlib.sha256(a_path.read_bytes()).hexdigest()
    code = "a = transfer('bob', 1)['to']\nb = transfer('cy', 2)['to']\n[a, b]"
    async with worker(client, task_queue, a_path).running():
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (first,) = (await wait_parked(handle)).pending_approvals
        assert first.signed
        async with worker(await other_client(client), task_queue, b_path).running():
            await _polling(client, task_queue, approvers_peers.tag_of_file(b_path))
            named = await approvers_peers.differing(client, task_queue, approvers_peers.tag_of_file(a_path))
            assert approvers_peers.tag_of_file(b_path) in named.values(), named
    async with worker(client, task_queue, b_path).running():
        sig = ana.sign(handle.id, first)
        await handle.signal("approve", ApproveSignal(call_id=first.call_id, signature=sig))
        why = ""
        for _ in range(300):  # B ran call 1 (ana is listed in B too), then refused to gate call 2
            pending = (await handle.describe()).raw_description.pending_activities
            why = " ".join(p.last_failure.message for p in pending if p.last_failure.message)
            if "not the one execution" in why:
                break
            await asyncio.sleep(0.1)
        assert "does not supersede it" in why, why
        assert len(read_events(events_file)) == 1  # call 2 neither ran nor was allowed by B's policy
        assert not (await status_of(handle)).pending_approvals
    c_path = write_file(tmp_path / "c.toml", f'supersedes = ["{a_sha}"]\n' + a_text + looser)
    async with worker(client, task_queue, c_path).running():
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.output == ["bob", "cy"]
    assert outcome.tool_calls[1].approval.rule == "policy.cy-ok"
    assert len(read_events(events_file)) == 2


async def test_a_pinned_call_no_worker_with_the_file_answers_is_refused(
    client, task_queue, tmp_path, events_file
) -> None:
    """Only a worker with another file is left: the run's second call is refused when its
    approval time is up (said in its record, door ``approvers``), never decided by that file's
    looser rule, and ``--verify`` holds the refusal as the history shows it."""
    from datetime import timedelta

    ana = Person("ana")
    a_text = people_toml((ana, [])) + '\n[tools.transfer]\napprovers = ["ana"]\n'
    looser = '\n[[policy]]\nname = "cy-ok"\ntool = "transfer"\ndecision = "allow"\nwhen = { to = "cy" }\n'
    a_path = write_file(tmp_path / "a.toml", a_text)
    b_path = write_file(tmp_path / "b.toml", a_text + looser)
    code = "a = transfer('bob', 1)['to']\ntry:\n    b = transfer('cy', 2)['to']\nexcept PermissionError as e:\n    b = str(e)\n[a, b]"
    request = CodeExecutionRequest(code=code, approval_timeout=timedelta(seconds=12))
    async with worker(client, task_queue, a_path).running():
        handle = await start_execution(client, request, task_queue=task_queue)
        (first,) = (await wait_parked(handle)).pending_approvals
    async with worker(client, task_queue, b_path).running():
        await handle.signal("approve", ApproveSignal(call_id=first.call_id, signature=ana.sign(handle.id, first)))
        outcome = await asyncio.wait_for(handle.result(), 90)
    assert outcome.output[0] == "bob" and "denied" in outcome.output[1], outcome.output
    record = outcome.tool_calls[1].approval
    assert record.decision == "denied" and record.by == "approvers file" and record.door == "approvers"
    assert "no worker could check the call against the approvers file in time" in (record.comment or "")
    assert [e["arg"] for e in read_events(events_file)] == ["bob"]  # cy's transfer never ran
    runs, _ = await fetch_runs(client, handle.id)
    assert (await verify_runs(handle.id, runs, client.data_converter)).ok
