"""An approval inside the agent's code ends the agent run with ``DeferredToolRequests``; the
agent's process exits; a person approves (or denies) with ``codemode approve``; a fresh
process resumes the conversation with ``deferred_results`` and the model sees the outcome.
The tool behind the approval runs exactly once. The code runs as a cell of the conversation's
session, which the resumed run keeps: its next call uses what the first one left."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from tests.cli.runner import codemode
from tests.workflows.conftest import read_events

ROOT = Path(__file__).resolve().parents[2]


async def agent_proc(mode: str, task_queue: str, state: Path, env: dict[str, str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(ROOT / "tests/integrations/agent_proc.py"),
        mode,
        task_queue,
        str(state),
        env=env,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"agent {mode} exited {proc.returncode}:\n{out.decode()}\n{err.decode()}"
    return out.decode().strip().splitlines()[-1]


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_deferred_approval_across_processes(
    temporal_address, task_queue, worker, events_file, tmp_path, decision
) -> None:
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "PYTHONPATH": str(ROOT)}
    state = tmp_path / "conversation.json"

    metadata = json.loads(await agent_proc("start", task_queue, state, env))
    [(tool_call_id, meta)] = metadata.items()
    execution_id = meta["execution_id"]
    assert [p["tool"] for p in meta["pending_approvals"]] == ["transfer"]
    assert not [e for e in read_events(events_file) if e["tool"] == "transfer"]  # nothing ran while it waits

    verb = (
        ["approve", execution_id, "--all", "--by", "ana"]
        if decision == "approve"
        else ["deny", execution_id, "--all", "--by", "ana", "--reason", "not today"]
    )
    decided = await codemode(*verb, env=env)
    assert decided.rc == 0, decided

    assert (execution_id, meta["cell"]) == (f"session:{meta['session']}:1", 1)  # a cell of the conversation's session

    answer = await agent_proc("resume", task_queue, state, env)
    returned, again = json.loads(answer.removeprefix("ANSWER: "))
    assert returned["execution_id"] == execution_id
    # The resumed run (the same conversation, another process) kept the session.
    assert (again["output"], again["session"], again["cell"]) == ("Paris again", meta["session"], 2)
    transfers = [e for e in read_events(events_file) if e["tool"] == "transfer" and e["event"] == "start"]
    if decision == "approve":
        assert returned["success"] is True
        assert returned["output"] == {"city": "Paris", "ref": f"{execution_id}/2"}
        assert len(transfers) == 1  # exactly once
    else:
        assert returned["success"] is False
        assert returned["error"]["type"] == "PermissionError"
        assert "denied by ana: not today" in returned["error"]["message"]
        assert transfers == []
