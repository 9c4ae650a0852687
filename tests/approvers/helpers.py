"""Approvers files, keys and signed decisions for the tests: real Ed25519 keys, a real file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from codemode.approvals import keys
from codemode.approvals.signing import DecisionSignature, sign_decision
from codemode.workflows.models import ExecutionStatus, PendingApproval


class Person:
    def __init__(self, name: str) -> None:
        self.name = name
        self.key = Ed25519PrivateKey.generate()

    @property
    def public(self) -> str:
        return keys.public_text(self.key.public_key())

    def sign(self, execution_id: str, call: PendingApproval, decision: str = "approve", **kw: Any) -> DecisionSignature:
        return sign_decision(
            self.key,
            signer=self.name,
            execution_id=execution_id,
            call_id=kw.pop("call_id", call.call_id),
            decision=decision,  # type: ignore[arg-type]
            args=kw.pop("args", call.args),
            kwargs=kw.pop("kwargs", call.kwargs),
            **kw,
        )


def write_file(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def people_toml(*people: tuple[Person, list[str]]) -> str:
    out = []
    for person, groups in people:
        out.append(f'[people.{person.name}]\nkeys = ["{person.public}"]\ngroups = {groups!r}\n'.replace("'", '"'))
    return "\n".join(out)


async def wait_parked(handle, calls: int = 1, timeout: float = 30.0) -> ExecutionStatus:
    for _ in range(int(timeout / 0.1)):
        status = await handle.query("status", result_type=ExecutionStatus)
        if status.state == "awaiting_approval" and len(status.pending_approvals) >= calls:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"never parked: {status}")


async def status_of(handle) -> ExecutionStatus:
    return await handle.query("status", result_type=ExecutionStatus)


async def wait_ignored(handle, count: int, timeout: float = 30.0) -> ExecutionStatus:
    for _ in range(int(timeout / 0.1)):
        status = await status_of(handle)
        if len(status.ignored_signals) >= count:
            return status
        await asyncio.sleep(0.1)
    raise AssertionError(f"only {len(status.ignored_signals)} ignored: {status.ignored_signals}")


HISTORIES = Path(__file__).resolve().parents[1] / "workflows" / "histories"


async def replay_and_keep(client, handle, name: str) -> None:
    """Replay the execution's history now; with CODEMODE_RECORD_APPROVER_HISTORIES=1 also keep it
    beside the committed ones (``approvers-NAME.json``), which tests/workflows/test_replay.py replays."""
    import os

    from temporalio.worker import Replayer

    from codemode.workflows.execution_workflow import CodeExecutionWorkflow

    history = await handle.fetch_history()
    await Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter).replay_workflow(history)
    if os.environ.get("CODEMODE_RECORD_APPROVER_HISTORIES") == "1":
        (HISTORIES / f"approvers-{name}.json").write_text(history.to_json())
