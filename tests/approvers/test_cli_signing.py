"""Every door signs, and the history proves it (issue 37): `codemode keygen --approver`, a
`codemode worker --approvers FILE`, `codemode approve --by NAME` signing with NAME's key, and
`codemode history ID --verify` passing on the real history and failing, naming the call, on an
altered one. Key rotation: a run approved under the old key still verifies. Real subprocesses."""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.workflows.models import ExecutionOutcome
from tests.cli.runner import Background, approve_command, base_env, codemode


@pytest.fixture(scope="module")
def env(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"approvers-{uuid.uuid4().hex[:8]}",
        CODEMODE_DATA_DIR=str(tmp_path_factory.mktemp("codemode-data")),
        XDG_CONFIG_HOME=str(tmp_path_factory.mktemp("config")),
    )


@pytest.fixture(scope="module")
def approvers_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("approvers")) / "approvers.toml"


async def keygen(env: dict[str, str], name: str, *flags: str) -> str:
    res = await codemode("keygen", "--approver", name, *flags, env=env)
    assert res.rc == 0, res
    public = res.out.strip().splitlines()[-1]
    assert public.startswith("ed25519:")
    return public


def write(path: Path, people: dict[str, tuple[list[str], list[str], list[str]]]) -> None:
    lines = []
    for name, (keys, retired, groups) in people.items():
        lines += [f"[people.{name}]", f"keys = {json.dumps(keys)}", f"retired_keys = {json.dumps(retired)}"]
        lines += [f"groups = {json.dumps(groups)}", ""]
    lines += ["[tools.send_email]", 'approvers = ["group:finance"]', ""]
    path.write_text("\n".join(lines))


@pytest.fixture(scope="module")
async def keys_and_worker(
    env: dict[str, str], approvers_file: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[dict[str, str]]:
    public = {"ana": await keygen(env, "ana"), "bob": await keygen(env, "bob")}
    write(approvers_file, {"ana": ([public["ana"]], [], ["finance"]), "bob": ([public["bob"]], [], [])})
    log = Path(tmp_path_factory.mktemp("worker")) / "worker.log"
    args = ("worker", "--tools", "examples.tools", "--approvers", str(approvers_file))
    worker = await Background(*args, env=env, log=log).start("Worker ready")
    assert f"Approvers: {approvers_file}" in worker.output()
    yield public
    assert await worker.stop() == 0, worker.output()


async def park_email(env: dict[str, str]) -> tuple[str, str]:
    res = await codemode("run", "examples/email.py", "--tools", "examples.tools", env=env)
    assert res.rc == 3, res
    execution_id, call_id = approve_command(res.err)
    assert f"codemode approve {execution_id} {call_id} --by NAME" in res.err  # it must be signed
    return execution_id, call_id


async def test_keygen_keeps_the_private_key_private(env, keys_and_worker) -> None:
    key = Path(env["XDG_CONFIG_HOME"]) / "codemode" / "approvers" / "ana.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    again = await codemode("keygen", "--approver", "ana", env=env)
    assert again.rc == 2 and "exists already" in again.err, again


async def test_signed_approval_verifies_and_an_altered_history_does_not(env, keys_and_worker, client, tmp_path) -> None:
    execution_id, call_id = await park_email(env)
    # bob has a key but the rule allows group:finance only: refused, with why
    bob = await codemode("approve", execution_id, call_id, "--by", "bob", env=env)
    assert bob.rc == 2 and "bob may not decide send_email" in bob.err, bob
    # carol has no key: the CLI says what to set up instead of sending an unsigned decision
    carol = await codemode("approve", execution_id, call_id, "--by", "carol", env=env)
    assert carol.rc == 2 and "codemode keygen --approver NAME" in carol.err, carol
    ana = await codemode("approve", execution_id, call_id, "--by", "ana", env=env)
    assert ana.rc == 0 and "signed with ed25519:" in ana.out, ana
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    approval = outcome.tool_calls[-1].approval
    assert approval is not None and (approval.by, approval.rule) == ("ana", "tools.send_email")
    assert approval.signatures[0].key == keys_and_worker["ana"]

    timeline = await codemode("history", execution_id, env=env)
    assert "ignored: bob may not decide send_email" in timeline.out, timeline
    assert "approved by ana (signed)" in timeline.out, timeline

    verified = await codemode("history", execution_id, "--verify", env=env)
    assert verified.rc == 0, verified
    assert f"✓ call {call_id} (send_email): approved by ana [signed by ana; rule tools.send_email]" in verified.out
    assert keys_and_worker["ana"] in verified.out

    # The same history exported, then one record altered: what the call asked.
    exported = json.loads((await client.get_workflow_handle(execution_id).fetch_history()).to_json())
    for event in exported["events"]:
        attrs = event.get("activityTaskScheduledEventAttributes")
        if attrs and attrs["activityType"]["name"] == "approval_gate":
            payload = attrs["input"]["payloads"][0]
            asked = json.loads(base64.b64decode(payload["data"]))
            asked["kwargs"]["to"] = "mallory@example.com"
            payload["data"] = base64.b64encode(json.dumps(asked).encode()).decode()
    intact = tmp_path / "intact.json"
    intact.write_text((await client.get_workflow_handle(execution_id).fetch_history()).to_json())
    altered = tmp_path / "altered.json"
    altered.write_text(json.dumps(exported))
    ok = await codemode("history", execution_id, "--verify", "--history-file", str(intact), env=env)
    assert ok.rc == 0, ok
    bad = await codemode("history", execution_id, "--verify", "--history-file", str(altered), env=env)
    assert bad.rc == 1, bad
    assert f"✗ call {call_id} (send_email)" in bad.out
    assert "ana signed other arguments than the call asked" in bad.out
    assert f"not verified: call {call_id}" in bad.err


async def test_key_rotation(env, keys_and_worker, approvers_file, tmp_path, client) -> None:
    execution_id, call_id = await park_email(env)
    assert (await codemode("approve", execution_id, call_id, "--by", "ana", env=env)).rc == 0
    assert (await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()).success
    # ana gets a new key; the old one stays listed for verification only
    old_key = tmp_path / "ana-old.key"
    shutil.copy(Path(env["XDG_CONFIG_HOME"]) / "codemode" / "approvers" / "ana.key", old_key)
    os.chmod(old_key, 0o600)
    new = await keygen(env, "ana", "--force")
    old = keys_and_worker["ana"]
    write(approvers_file, {"ana": ([new], [old], ["finance"]), "bob": ([keys_and_worker["bob"]], [], [])})
    # the run approved under the old key verifies against the new file, and against its own record
    for extra in (["--approvers", str(approvers_file)], []):
        res = await codemode("history", execution_id, "--verify", *extra, env=env)
        assert res.rc == 0, res
    # a new decision with the retired key is refused; with the new one it counts
    execution_id, call_id = await park_email(env)
    stale = await codemode("approve", execution_id, call_id, "--by", "ana", "--key", str(old_key), env=env)
    assert stale.rc == 2 and "retired key of ana" in stale.err, stale
    fresh = await codemode("approve", execution_id, call_id, "--by", "ana", env=env)
    assert fresh.rc == 0, fresh
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    assert outcome.tool_calls[-1].approval.signatures[0].key == new
