"""Sessions at real sizes: 1,000 small cells, and a 20 MB namespace. The session's history
stays bounded (it continues as new; the state is a reference, never a payload) and so does
what it stores (one state at a time, plus the cells' recipes). The numbers are printed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codemode.activities.checkpoints import CheckpointScope
from codemode.activities.sandbox_steps import RECIPE_SEGMENTS
from codemode.client.sessions import close_session, describe_session, run_cell, submit_cell
from codemode.workflows.session_models import session_workflow_id


async def _runs(client, workflow_id: str) -> list[tuple[str, int, int]]:
    """(run id, events, history bytes) of every run of a workflow."""
    found = []
    async for wf in client.list_workflows(f"WorkflowId = '{workflow_id}'"):
        history = await client.get_workflow_handle(workflow_id, run_id=wf.run_id).fetch_history()
        size = sum(e.ByteSize() for e in history.events)
        found.append((wf.run_id, len(history.events), size))
    return found


def _stored(data_dir: Path, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under a key prefix of the file store (``<data dir>/blobs/<bucket>/<key>``)."""
    root = data_dir / "blobs" / "codemode" / prefix
    files = [p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")] if root.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


async def _session_scope(client, name: str) -> CheckpointScope:
    handle = client.get_workflow_handle(session_workflow_id(name))
    first_run = (await handle.describe()).raw_description.workflow_execution_info.first_run_id
    return CheckpointScope("default", session_workflow_id(name), first_run)


@pytest.mark.slow
async def test_a_thousand_small_cells(client, task_queue, worker, data_dir, session_name) -> None:
    began = time.monotonic()
    await run_cell(client, session_name, "counter = 0\nlog = []", task_queue=task_queue)
    # As an agent that sends cells faster than they run: up to 50 wait in the session's queue
    # at a time (the session runs them one by one, in order), then their outcomes are read.
    for start in range(1, 1000, 50):
        cells = [
            await submit_cell(client, session_name, f"counter += 1\nlog.append({i} % 7)\ncounter", task_queue=task_queue)
            for i in range(start, min(start + 50, 1000))
        ]
        for i, cell in zip(range(start, 1000), cells):
            assert cell.index == i + 1  # cells are numbered from 1, in the order they were sent
            outcome = await cell.result()
            assert outcome.success and outcome.output == i, outcome.error
    elapsed = time.monotonic() - began
    status = await describe_session(client, session_name)
    assert status.cells == 1000 and status.variables == {"counter": "int", "log": "list"}
    scope = await _session_scope(client, session_name)
    objects, stored = _stored(data_dir, scope.root)
    runs = await _runs(client, session_workflow_id(session_name))
    print(
        f"\n1,000 cells in {elapsed:.1f} s ({elapsed:.0f} ms/cell); session: {len(runs)} runs, "
        f"largest run {max(r[1] for r in runs)} events / {max(r[2] for r in runs) / 1024:.0f} KB of history; "
        f"stored under the session: {objects} objects, {stored / 1024:.0f} KB (state {status.state_bytes / 1024:.0f} KB)"
    )
    assert len(runs) >= 2  # it continued as new
    assert max(r[1] for r in runs) < 10_000 and max(r[2] for r in runs) < 4 * 1024 * 1024
    # The current state (and a superseded one not deleted yet), the recipe's stored segments.
    assert objects <= 2 + RECIPE_SEGMENTS
    assert stored < 2 * 1024 * 1024
    await close_session(client, session_name)
    assert _stored(data_dir, scope.root) == (0, 0)


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_a_20_mb_namespace(client, task_queue, worker, data_dir, session_name, runtime) -> None:
    build = "data = ['x' * 1000 + str(i) for i in range(20000)]\nlen(data)"
    began = time.monotonic()
    first = await run_cell(client, session_name, build, runtime=runtime, task_queue=task_queue)
    assert first.success and first.output == 20000, first.error
    for n in range(3):
        outcome = await run_cell(
            client,
            session_name,
            f"data.append('y')\n[len(data), data[{n}][-1]]",
            runtime=runtime,
            task_queue=task_queue,
        )
        assert outcome.output == [20001 + n, str(n)]
    elapsed = time.monotonic() - began
    status = await describe_session(client, session_name)
    scope = await _session_scope(client, session_name)
    objects, stored = _stored(data_dir, scope.root)
    runs = await _runs(client, session_workflow_id(session_name))
    history = max(r[2] for r in runs)
    cell_history = sum(
        e.ByteSize() for e in (await client.get_workflow_handle(f"session:{session_name}:4").fetch_history()).events
    )
    print(
        f"\n20 MB namespace ({runtime}): 4 cells in {elapsed:.1f} s; kept as {status.kept_as} "
        f"({status.state_bytes / 2**20:.1f} MB); session history {history / 1024:.0f} KB, a cell's "
        f"{cell_history / 1024:.0f} KB; stored under the session: {objects} objects, {stored / 2**20:.1f} MB"
    )
    assert history < 256 * 1024 and cell_history < 256 * 1024  # references, never the namespace
    if runtime == "monty":
        assert status.kept_as == "state" and status.state_bytes > 20 * 10**6
        assert stored < 3 * status.state_bytes  # the state, at most one superseded one not yet deleted
    else:
        assert status.kept_as == "live" and objects == 0  # the live process; its recipe is its code
    await close_session(client, session_name)
    assert _stored(data_dir, scope.root) == (0, 0)
