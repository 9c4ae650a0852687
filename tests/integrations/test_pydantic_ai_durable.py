"""An agent under pydantic-ai's Temporal durability parks on an approval in its child
execution; its worker is SIGKILLed; a person approves with no worker running; a new worker
finishes the agent's run. Each tool ran once; the child is linked to the agent's workflow."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin
from temporalio.client import Client

from codemode.client.following import query_status
from codemode.storage import BlobStore
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import ExecutionOutcome
from tests.cli.runner import codemode
from tests.workflows.conftest import read_events

ROOT = Path(__file__).resolve().parents[2]


def spawn_worker(address: str, task_queue: str, events: Path) -> subprocess.Popen:
    env = {**os.environ, "CODEMODE_TEST_EVENTS": str(events), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/integrations/durable_worker_proc.py"), address, task_queue],
        env=env,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


async def test_durable_agent_survives_a_sigkill_while_its_code_waits_for_approval(
    temporal_address, store: BlobStore, events_file: Path
) -> None:
    from tests.integrations.durable_agent import CoderAgentWorkflow

    client = await Client.connect(temporal_address, plugins=[PydanticAIPlugin(), CodeModePlugin(store=store)])
    task_queue = f"agents-{uuid.uuid4().hex[:6]}"
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        agent_id = f"coder-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(CoderAgentWorkflow.run, "pay ana", id=agent_id, task_queue=task_queue)
        child_id = f"{agent_id}-run_code-call-1"
        child = client.get_workflow_handle(child_id)
        for _ in range(300):
            status = await query_status(child)
            if status is not None and status.state == "awaiting_approval":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the child execution never parked on its approval")
        assert [p.tool for p in status.pending_approvals] == ["transfer"]
        assert (await child.describe()).parent_id == agent_id  # linked to the agent in the UI

        first.send_signal(signal.SIGKILL)
        first.wait()
        env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address}
        decided = await codemode("approve", child_id, "--all", "--by", "ana", env=env)
        assert decided.rc == 0, decided
        assert "no worker is running" in decided.err  # recorded as a signal, applied later

        second = spawn_worker(temporal_address, task_queue, events_file)
        answer = await asyncio.wait_for(handle.result(), 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    returned = json.loads(answer.removeprefix("ANSWER: "))
    assert returned["success"] is True
    assert returned["output"] == {"city": "Paris", "ref": f"{child_id}/2"}
    assert returned["execution_id"] == child_id
    transfers = [e for e in read_events(events_file) if e["tool"] == "transfer" and e["event"] == "start"]
    assert len(transfers) == 1
    outcome = await client.get_workflow_handle(child_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]
    assert outcome.tool_calls[1].approval is not None and outcome.tool_calls[1].approval.by == "ana"


async def test_durable_agent_keeps_a_session_through_a_sigkill_while_its_second_cell_waits(
    temporal_address, store: BlobStore, events_file: Path
) -> None:
    """Inside a workflow, the calls of one agent are cells of a session that is the agent
    workflow's child: the second uses what the first defined, parks on an approval, survives
    the worker's SIGKILL, and the session ends with the agent."""
    from codemode.integrations.pydantic_ai.session import workflow_session_name
    from tests.integrations.durable_agent import SessionCoderAgentWorkflow

    client = await Client.connect(temporal_address, plugins=[PydanticAIPlugin(), CodeModePlugin(store=store)])
    task_queue = f"agents-{uuid.uuid4().hex[:6]}"
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        agent_id = f"sessioncoder-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(
            SessionCoderAgentWorkflow.run, "pay ana", id=agent_id, task_queue=task_queue
        )
        session = workflow_session_name(agent_id, "sessioncoder", "run_code")
        assert session == f"{agent_id}-sessioncoder-run_code"
        cell_id = f"session:{session}:2"
        cell = client.get_workflow_handle(cell_id)
        for _ in range(300):
            status = await query_status(cell)
            if status is not None and status.state == "awaiting_approval":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the second cell never parked on its approval")
        assert [p.tool for p in status.pending_approvals] == ["transfer"]
        # Linked in the UI: the agent -> its session -> the cell.
        assert (await client.get_workflow_handle(f"session:{session}").describe()).parent_id == agent_id
        assert (await cell.describe()).parent_id == f"session:{session}"

        first.send_signal(signal.SIGKILL)
        first.wait()
        env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address}
        decided = await codemode("approve", cell_id, "--all", "--by", "ana", env=env)
        assert decided.rc == 0, decided

        second = spawn_worker(temporal_address, task_queue, events_file)
        answer = await asyncio.wait_for(handle.result(), 120)
        # The session ended with its agent: closed, its state let go.
        summary = await asyncio.wait_for(client.get_workflow_handle(f"session:{session}").result(), 60)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    defined, paid = json.loads(answer.removeprefix("ANSWER: "))
    assert (defined["output"], defined["session"], defined["cell"]) == ("Paris", session, 1)
    assert paid["success"] is True and (paid["session"], paid["cell"]) == (session, 2)
    assert paid["output"] == {"city": "Paris", "ref": f"{cell_id}/1"}  # `city` came from the first call
    transfers = [e for e in read_events(events_file) if e["tool"] == "transfer" and e["event"] == "start"]
    assert len(transfers) == 1
    outcome = await client.get_workflow_handle(cell_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("transfer", 1)]
    assert summary["closed_reason"] == f"its workflow {agent_id} ended" and summary["cells"] == 2
