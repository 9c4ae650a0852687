"""Determinism of the session workflow and of its cells' executions: histories recorded now
replay with temporalio's Replayer, and so do the ones committed under histories/ (a change
that breaks running sessions fails here). Regenerate the committed set deliberately with
CODEMODE_RECORD_HISTORIES=1 (it also records a session that continues as new, on a dev
server of its own that suggests it after 60 events)."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.client.sessions import close_session, run_cell, submit_cell
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, ExecutionStatus
from codemode.workflows.session_workflow import CodeSessionWorkflow

from ..workflows.conftest import TOOLS_MODULE
from .session_parent import SessionParentWorkflow

HISTORIES = Path(__file__).parent / "histories"
#: (with the workflow of test_child_session.py, whose session is its child: child-*.json)
WORKFLOWS = [CodeSessionWorkflow, CodeExecutionWorkflow, SessionParentWorkflow]


async def _aiter(items):
    for item in items:
        yield item


async def _histories(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """Every run of a workflow, oldest first."""
    found = []
    async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        found.append(await client.get_workflow_handle(workflow_id, run_id=wf.run_id).fetch_history())
    return list(reversed(found))


async def _scenario(client: Client, task_queue: str, name: str) -> dict[str, WorkflowHistory]:
    """A session through its paths: a cell with a tool call, one whose code raises, one that
    cannot start, a restart, a cell parked on an approval with one queued behind it, then
    closed; and a python session (its live process, reached on the worker's own queue)."""

    async def cell(code: str, **kw):
        return await run_cell(client, name, code, task_queue=task_queue, **kw)

    await cell("acc = [slow_step(1, 0)]")
    await cell("acc.append(2)\nraise ValueError('kept anyway')")
    await cell("acc.append(undefined_name)")  # a type error: never ran
    parked = await submit_cell(client, name, "acc.append(transfer('bob', 1)['to'])", task_queue=task_queue)
    handle = await parked.started()
    while (await handle.query("status", result_type=ExecutionStatus)).state != "awaiting_approval":
        await asyncio.sleep(0.05)
    behind = await submit_cell(client, name, "len(acc)", task_queue=task_queue)
    await handle.signal("approve", ApproveSignal(call_id="1", by="ana"))
    await behind.result()
    await cell("fresh = 1", restart=True)
    await close_session(client, name)
    python = f"{name}-py"
    for code in ("xs = [slow_step(2, 0)]", "xs.append(3)\nxs"):
        await run_cell(client, python, code, runtime="python", task_queue=task_queue)
    await close_session(client, python)
    histories: dict[str, WorkflowHistory] = {}
    for prefix, session, cells in ((f"session-{name}", name, 6), (f"session-{python}", python, 2)):
        for i, h in enumerate(await _histories(client, f"session:{session}")):
            histories[f"{prefix}-run{i}"] = h
        for n in range(1, cells + 1):
            (h,) = await _histories(client, f"session:{session}:{n}")
            histories[f"{prefix}-cell{n}"] = h
    return histories


async def _rolled_over(name: str) -> dict[str, WorkflowHistory]:
    """A session that continues as new (a server that suggests it after 60 events)."""
    env = await start_local_environment(dynamic_config={"limit.historyCount.suggestContinueAsNew": 60})
    try:
        client = env.client
        task_queue = f"tq-{uuid.uuid4().hex[:8]}"
        async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue).running():
            await run_cell(client, name, "n = 0", task_queue=task_queue)
            for _ in range(12):
                await run_cell(client, name, "n += 1", task_queue=task_queue)
            await close_session(client, name)
            runs = await _histories(client, f"session:{name}")
        assert len(runs) >= 2, "the session did not continue as new"
        return {f"session-rolled-run{i}": h for i, h in enumerate(runs)}
    finally:
        await env.shutdown()


async def test_recorded_session_histories_replay(client, task_queue, worker, events_file) -> None:
    name = f"replay-{uuid.uuid4().hex[:6]}"
    histories = await _scenario(client, task_queue, name)
    if os.environ.get("CODEMODE_RECORD_HISTORIES") == "1":
        histories.update(await _rolled_over(f"rolled-{uuid.uuid4().hex[:6]}"))
        HISTORIES.mkdir(exist_ok=True)
        for old in HISTORIES.glob("session-*.json"):
            old.unlink()
        for key, history in histories.items():
            (HISTORIES / f"{key.replace(name, 'demo')}.json").write_text(history.to_json())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=client.data_converter)
    results = await replayer.replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}


async def test_committed_session_histories_replay(converter) -> None:
    files = sorted(HISTORIES.glob("*.json"))
    assert any("rolled" in f.name for f in files) and any("cell" in f.name for f in files)
    assert any(f.name.startswith("child-") for f in files)
    histories = [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]
    replayer = Replayer(workflows=WORKFLOWS, data_converter=converter)
    results = await replayer.replay_workflows(_aiter(histories), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}
