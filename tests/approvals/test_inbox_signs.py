"""The inbox under an approvers file (issues 36 and 37 together): it signs with its own service
key on behalf of the person it authenticated (here behind a trusted header), over the arguments
the person edited; the workflow's tally accepts it because the file lets the inbox sign for
that person; the history records the inbox's signature for the person, and
``codemode history --verify`` passes on it."""

from __future__ import annotations

import uuid
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives import serialization

from codemode.activities import ToolRegistry
from codemode.apps.inbox.auth import InboxAuth
from codemode.apps.inbox.serve import start_inbox
from codemode.apps.inbox.signing import inbox_signer
from codemode.client.executions import start_execution
from codemode.worker.dev_server import free_port
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.approvers.helpers import Person
from tests.cli.runner import base_env, codemode

from .conftest import TOOLS_MODULE, read_events
from .test_decisions import SEND, parked

ANA = {"X-Forwarded-Email": "ana@example.com"}


def _approvers(path: Path, inbox: Person, ana: Person) -> Path:
    path.write_text(
        f'[people."ana@example.com"]\nkeys = ["{ana.public}"]\ngroups = ["finance"]\n\n'
        f'[people.inbox]\nkeys = ["{inbox.public}"]\nsigns_for = ["group:finance"]\n\n'
        '[tools.send_money]\napprovers = ["group:finance"]\n'
    )
    return path


async def test_inbox_signs_an_edited_approval_for_the_person(
    client, temporal_address, task_queue, events_file, tmp_path
) -> None:
    inbox_person, ana = Person("inbox"), Person("ana@example.com")
    approvers = _approvers(tmp_path / "approvers.toml", inbox_person, ana)
    key_file = tmp_path / "inbox.key"
    key_file.write_bytes(
        inbox_person.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_file.chmod(0o600)
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    worker = CodeModeWorker(client, registry, task_queue=task_queue, approvers=approvers)
    auth = InboxAuth.build("X-Forwarded-Email", ["127.0.0.1"], None)
    async with worker.running():
        unsigned = await start_inbox(client, auth, port=free_port())  # no key: refuses, sends nothing
        signing = await start_inbox(client, auth, port=free_port(), signer=inbox_signer(key_file))
        try:
            handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
            (pending,) = (await parked(handle)).pending_approvals
            assert pending.signed
            path = f"/calls/{handle.id}/{pending.call_id}"
            async with aiohttp.ClientSession(headers=ANA) as http:
                async with http.get(unsigned.url + path) as resp:
                    csrf = (await resp.text()).split('name="csrf" value="', 1)[1].split('"', 1)[0]
                form = {"csrf": csrf, "action": "edit", "arguments": '{"amount": 400}'}
                async with http.post(unsigned.url + path, data=form) as resp:
                    assert resp.status == 409 and "no signing key" in await resp.text()
                assert (await parked(handle)).pending_approvals  # still waiting, nothing recorded
                async with http.post(signing.url + path, data=form) as resp:
                    assert resp.status == 200 and "Approved as ana@example.com" in await resp.text()
            outcome = await handle.result()
        finally:
            await unsigned.stop()
            await signing.stop()
    assert outcome.success and outcome.output == ["bob", 400]
    (call,) = outcome.tool_calls
    approval = call.approval
    assert approval.door == "inbox" and approval.by == "ana@example.com"
    assert approval.asked_arguments == {"to": "bob", "amount": 900}
    assert approval.approved_arguments == {"to": "bob", "amount": 400}
    (sig,) = approval.signatures
    assert (sig.signer, sig.on_behalf_of, sig.key) == ("inbox", "ana@example.com", inbox_person.public)
    assert [(e["tool"], e["amount"]) for e in read_events(events_file)] == [("send_money", 400)]

    env = base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=task_queue,
        XDG_CONFIG_HOME=str(tmp_path / f"config-{uuid.uuid4().hex[:6]}"),
    )
    verified = await codemode("history", handle.id, "--verify", env=env)
    assert verified.rc == 0, verified.out + verified.err
    assert "signed by ana@example.com" in verified.out and "every decision holds" in verified.out
    with_file = await codemode("history", handle.id, "--verify", "--approvers", str(approvers), env=env)
    assert with_file.rc == 0, with_file.out + with_file.err


async def test_cli_answer_is_signed_and_verifies(client, temporal_address, task_queue, events_file, tmp_path) -> None:
    env = base_env(
        TEMPORAL_ADDRESS=temporal_address, CODEMODE_TASK_QUEUE=task_queue, XDG_CONFIG_HOME=str(tmp_path / "config")
    )
    made = await codemode("keygen", "--approver", "ana", env=env)
    assert made.rc == 0, made
    public = made.out.strip().splitlines()[-1]
    approvers = tmp_path / "approvers.toml"
    approvers.write_text(f'[people.ana]\nkeys = ["{public}"]\n\n[tools.send_money]\napprovers = ["ana"]\n')
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, approvers=approvers)
    async with worker.running():
        handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        result = '{"to": "bob", "amount": 1}'
        unsigned = await codemode("answer", handle.id, pending.call_id, "--result", result, "--by", "bo", env=env)
        assert unsigned.rc != 0 and "needs a signed decision" in unsigned.err, unsigned
        answered = await codemode("answer", handle.id, pending.call_id, "--result", result, "--by", "ana", env=env)
        assert answered.rc == 0 and "answered call" in answered.out and "signed with" in answered.out, answered
        outcome = await handle.result()
    assert outcome.output == ["bob", 1]
    (call,) = outcome.tool_calls
    assert call.approval.answered and call.approval.by == "ana"
    (sig,) = call.approval.signatures
    assert (sig.decision, sig.signer, sig.answer_sha256 is not None) == ("answer", "ana", True)
    assert read_events(events_file) == []  # the tool never ran
    verified = await codemode("history", handle.id, "--verify", env=env)
    assert verified.rc == 0 and "every decision holds" in verified.out, verified
