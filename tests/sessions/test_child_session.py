"""Sessions from a workflow of the application's own (``workflows/child_session.py``): the
session is the workflow's child, cells go by signal and their outcomes come back by signal,
a request sent twice runs once, the session ends with the workflow (and deletes its state),
and a session that closed under the workflow is replaced by a fresh one."""

from __future__ import annotations

import asyncio
import collections
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from codemode.activities.checkpoints import CheckpointScope
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, ExecutionStatus
from codemode.workflows.session_models import session_workflow_id
from codemode.workflows.session_workflow import CodeSessionWorkflow

from ..workflows.conftest import TOOLS_MODULE, read_events
from .session_parent import ParentInput, SessionParentWorkflow, Step

HISTORIES = Path(__file__).parent / "histories"
WORKFLOWS = [SessionParentWorkflow, CodeSessionWorkflow, CodeExecutionWorkflow]


async def _aiter(items):
    for item in items:
        yield item


@pytest.fixture
async def parent_worker(client: Client, task_queue: str) -> AsyncIterator[Worker]:
    worker = Worker(
        client, task_queue=task_queue, workflows=[SessionParentWorkflow], plugins=[CodeModePlugin(TOOLS_MODULE)]
    )
    async with worker:
        yield worker


async def _approve_when_parked(client: Client, execution_id: str) -> None:
    handle = client.get_workflow_handle(execution_id)
    for _ in range(300):
        try:
            status = await handle.query("status", result_type=ExecutionStatus)
        except Exception:  # not started yet
            status = None
        if status is not None and status.state == "awaiting_approval":
            await handle.signal("approve", ApproveSignal(call_id="1", by="ana"))
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{execution_id} never parked on its approval")


async def _run_scenario(client: Client, task_queue: str, name: str) -> tuple[str, list]:
    steps = [
        Step(code="acc = [slow_step(1, 0)]\nlen(acc)", request_id="r1"),
        Step(code="acc.append(transfer('bob', 1)['to'])\nacc", request_id="r2"),
        Step(code="acc.append('again')", request_id="r1"),  # sent again: not run again
        Step(code="fresh = 1\nfresh", request_id="r3", restart=True),
        Step(code="fresh + len([1, 2])", request_id="r4"),
    ]
    parent_id = f"parent-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        SessionParentWorkflow.run, ParentInput(session=name, steps=steps), id=parent_id, task_queue=task_queue
    )
    await _approve_when_parked(client, f"session:{name}:2")
    return parent_id, await handle.result()


async def test_a_workflow_runs_cells_in_a_session_of_its_own(
    client, task_queue, parent_worker, events_file, store
) -> None:
    name = f"w-{uuid.uuid4().hex[:8]}"
    parent_id, results = await _run_scenario(client, task_queue, name)
    assert [(r.index, r.success, r.output) for r in results] == [
        (1, True, 1),
        (2, True, [10, "bob"]),
        (1, True, 1),  # the first cell's answer again
        (3, True, 1),
        (4, True, 3),
    ]
    assert {r.session for r in results} == {name} and not any(r.replaced for r in results)
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}
    # The session was the workflow's child, and ended with it: closed, its state deleted.
    session = client.get_workflow_handle(session_workflow_id(name))
    desc = await session.describe()
    assert desc.parent_id == parent_id
    summary = await asyncio.wait_for(session.result(), 30)
    assert summary["closed_reason"] == f"its workflow {parent_id} ended" and summary["cells"] == 4
    scope = CheckpointScope("default", session_workflow_id(name), desc.run_id)
    assert await store.list_keys(bucket=store.bucket, prefix=scope.root) == []
    # The three workflows replay (and, with CODEMODE_RECORD_HISTORIES=1, are committed under
    # histories/ for test_session_replay's check of the committed set).
    histories = {
        "child-parent": await client.get_workflow_handle(parent_id).fetch_history(),
        "child-session": await session.fetch_history(),
        **{
            f"child-cell{n}": await client.get_workflow_handle(f"session:{name}:{n}").fetch_history()
            for n in range(1, 5)
        },
    }
    if os.environ.get("CODEMODE_RECORD_HISTORIES") == "1":
        for old in HISTORIES.glob("child-*.json"):
            old.unlink()
        for key, history in histories.items():
            (HISTORIES / f"{key}.json").write_text(history.to_json())
    replayer = Replayer(workflows=WORKFLOWS, data_converter=client.data_converter)
    replayed = await replayer.replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in replayed.replay_failures.items()}


async def test_a_session_that_closed_under_the_workflow_is_replaced(client, task_queue, parent_worker) -> None:
    name = f"w-{uuid.uuid4().hex[:8]}"
    job = ParentInput(
        session=name,
        idle_seconds=1,
        steps=[
            Step(code="x = 1\nx", request_id="a"),
            Step(code="y = 2\ny", request_id="b", pause_seconds=3),
            Step(code="y + 1", request_id="c"),
        ],
    )
    results = await client.execute_workflow(
        SessionParentWorkflow.run, job, id=f"parent-{uuid.uuid4().hex[:8]}", task_queue=task_queue
    )
    assert [(r.session, r.index, r.output, r.replaced) for r in results] == [
        (name, 1, 1, None),
        (f"{name}.2", 1, 2, "idle for 1s"),  # a fresh namespace, and why
        (f"{name}.2", 2, 3, None),
    ]
