"""Sessions on a real server, workers and store, on monty, python and e2b: cells share a
namespace, an error keeps what ran before it, restart clears, cells run one at a time in
order (two sent at once, or behind a cell parked on an approval), and bad input is refused."""

from __future__ import annotations

import asyncio
import collections
import os

import pytest
from pydantic import ValidationError

from codemode.activities.checkpoints import CheckpointScope
from codemode.client.histories.audit import fetch_audit
from codemode.client.sessions import (
    InvalidSessionName,
    RuntimeMismatch,
    SessionClosed,
    SessionNotFound,
    SessionUnsupported,
    close_session,
    describe_session,
    run_cell,
    submit_cell,
)
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionStatus
from codemode.workflows.session_models import CellRecord, session_workflow_id
from tests.cli.runner import base_env, codemode

from ..workflows.conftest import read_events
from .conftest import e2b_sandboxes, no_e2b_sandbox_left

DEFINE = "data = [slow_step(1, 0), 2, 3]\ndef total(xs):\n    return sum(xs)\nprint('defined')\ntotal(data)"


async def settled(client, name: str):
    """The session's status once it recorded the end of its last cell (a cell's outcome
    reaches its caller straight from the cell's execution, a moment before the session)."""
    for _ in range(100):
        status = await describe_session(client, name)
        if status.running is None and not status.queued:
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"session {name} never settled: {status}")


async def test_cells_share_a_namespace_errors_keep_what_ran_and_restart_clears(
    client, task_queue, worker, events_file, runtime, session_name
) -> None:
    async def cell(code: str, **kw):
        return await run_cell(client, session_name, code, runtime=runtime, task_queue=task_queue, **kw)

    first = await cell(DEFINE)
    assert first.success, first.error
    assert first.output == 15 and first.stdout == "defined\n"
    assert first.execution_id == f"session:{session_name}:1"
    second = await cell("data.append(await fetch(4) - 100)\ntotal(data)")  # an async tool
    assert second.success and second.output == 19
    # The code raises half-way: what it did before the error stays (notebook semantics).
    third = await cell("kept = total(data) * 10\nraise ValueError('boom')\nlost = 1")
    assert not third.success and third.error.type == "ValueError" and third.error.line == 2
    assert third.cell is not None and third.cell.effect == "kept"
    fourth = await cell("try:\n    lost\n    r = 'lost is there'\nexcept NameError:\n    r = kept\nr")
    assert fourth.success and fourth.output == 190
    fifth = await cell("extra = await fetch(5)\nextra")  # a second cell with an async call (its ids start at 1 again)
    assert fifth.success and fifth.output == 105
    status = await settled(client, session_name)
    assert status.runtime == runtime and status.cells == 5 and status.state == "open"
    assert {"data": "list", "total": "function", "kept": "int", "extra": "int"}.items() <= status.variables.items()
    assert [r.state for r in status.recent] == ["completed", "completed", "failed", "completed", "completed"]
    # Each cell found the session where the cell before left it, never rebuilt: monty's warm
    # on this worker (its dump in the store), python's live process, e2b's paused sandbox.
    for n in range(2, 6):
        steps = (await fetch_audit(client, f"session:{session_name}:{n}")).steps
        expected = "restored" if runtime == "e2b" else "live"
        assert steps[0].via == expected, (n, [(s.name, s.via, s.fallback) for s in steps])
    if runtime == "e2b":  # between cells the sandbox is paused: no compute while idle
        (sandbox,) = await e2b_sandboxes()
        assert sandbox.state.value == "paused"
    # restart: a fresh namespace for this cell and the ones after it.
    restarted = await cell("fresh = 1\nfresh", restart=True)
    assert restarted.success and restarted.output == 1
    status = await settled(client, session_name)
    assert status.restarts == 1 and status.variables == {"fresh": "int"}
    if runtime != "monty":  # (Monty's type check refuses an unknown name before it runs)
        cleared = await cell("try:\n    data\n    r = 'still there'\nexcept NameError:\n    r = 'cleared'\nr")
        assert cleared.output == "cleared"
    # The tool of the first cell ran once: later cells never ran it again.
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "fetch": 2}
    summary = await close_session(client, session_name)
    assert summary.cells == (6 if runtime == "monty" else 7) and summary.closed_reason == "closed on request"
    await no_e2b_sandbox_left()


async def test_two_cells_sent_at_once_see_one_namespace(client, task_queue, worker, session_name) -> None:
    await run_cell(client, session_name, "counter = 0", task_queue=task_queue)
    bump = "counter = counter + 1\ncounter"
    a, b = await asyncio.gather(
        submit_cell(client, session_name, bump, task_queue=task_queue),
        submit_cell(client, session_name, bump, task_queue=task_queue),
    )
    outcomes = await asyncio.gather(a.result(), b.result())
    assert sorted(o.output for o in outcomes) == [1, 2]
    assert {a.index, b.index} == {2, 3}
    last = await run_cell(client, session_name, "counter", task_queue=task_queue)
    assert last.output == 2
    await close_session(client, session_name)


async def test_a_cell_parked_on_approval_holds_later_cells_until_approved(
    client, temporal_address, task_queue, worker, session_name
) -> None:
    await run_cell(client, session_name, "order = []", task_queue=task_queue)
    parked = await submit_cell(client, session_name, "order.append(transfer('bob', 1)['to'])", task_queue=task_queue)
    handle = await parked.started()
    for _ in range(200):
        status = await handle.query("status", result_type=ExecutionStatus)
        if status.state == "awaiting_approval":
            break
        await asyncio.sleep(0.05)
    assert status.state == "awaiting_approval"
    later = [await submit_cell(client, session_name, f"order.append({i})", task_queue=task_queue) for i in range(2)]
    assert [c.ticket.ahead for c in later] == [1, 2]
    waiting = await later[0].status()
    assert isinstance(waiting, CellRecord) and waiting.state == "queued"
    assert waiting.waiting_for == f"cell 2 ({parked.execution_id}, running)"
    session = await describe_session(client, session_name)
    assert [r.index for r in session.queued] == [3, 4] and session.running.index == 2
    shown = await codemode(
        "status",
        later[1].execution_id,
        env=base_env(TEMPORAL_ADDRESS=temporal_address, CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"]),
    )
    assert f"{later[1].execution_id}: queued (waits for cell 3 ({later[0].execution_id}, queued))" in shown.out, shown
    await asyncio.sleep(0.5)
    assert (await later[1].status()).state == "queued"  # still held
    await handle.signal("approve", ApproveSignal(call_id="1", by="ana"))
    for c in later:
        assert (await c.result()).success
    final = await run_cell(client, session_name, "order", task_queue=task_queue)
    assert final.output == ["bob", 0, 1]
    await close_session(client, session_name)


async def test_bad_input_is_refused_clearly(client, task_queue, worker, session_name) -> None:
    with pytest.raises(InvalidSessionName, match="invalid session name 'no spaces please'"):
        await submit_cell(client, "no spaces please", "1", task_queue=task_queue)
    with pytest.raises(ValidationError, match="invalid session name"):
        CodeExecutionRequest(code="1", session="a/b")
    with pytest.raises(SessionNotFound):
        await describe_session(client, session_name)
    with pytest.raises(SessionUnsupported, match="ratchet"):
        await submit_cell(
            client, session_name, CodeExecutionRequest(code="1", network="ratchet"), task_queue=task_queue
        )
    await run_cell(client, session_name, "x = 1", task_queue=task_queue)
    with pytest.raises(RuntimeMismatch, match=f"session '{session_name}' runs on monty; this cell asks for python"):
        await submit_cell(client, session_name, "x", runtime="python", task_queue=task_queue)
    await close_session(client, session_name)
    with pytest.raises(SessionClosed, match="closed"):
        await submit_cell(client, session_name, "x", task_queue=task_queue)
    # The request path (CodeExecutionRequest(session=...)) says the same.
    from codemode.client.executions import start_execution

    with pytest.raises(SessionClosed):
        await start_execution(client, CodeExecutionRequest(code="x", session=session_name), task_queue=task_queue)


async def test_request_with_a_session_runs_as_its_next_cell(client, task_queue, worker, session_name) -> None:
    from codemode.client.executions import run_execution

    first = await run_execution(
        client, CodeExecutionRequest(code="x = 20", session=session_name), task_queue=task_queue
    )
    second = await run_execution(
        client, CodeExecutionRequest(code="x + 1", session=session_name), task_queue=task_queue
    )
    assert (first.execution_id, second.execution_id) == (f"session:{session_name}:1", f"session:{session_name}:2")
    assert second.output == 21
    await close_session(client, session_name)


async def test_idle_session_closes_and_deletes_its_state(client, task_queue, worker, store, session_name) -> None:
    from datetime import timedelta

    outcome = await run_cell(
        client, session_name, "big = 'x' * 100000", task_queue=task_queue, idle_timeout=timedelta(seconds=2)
    )
    desc = await client.get_workflow_handle(session_workflow_id(session_name)).describe()
    scope = CheckpointScope("default", session_workflow_id(session_name), desc.run_id)
    assert outcome.cell.state is not None
    assert await store.list_keys(bucket=store.bucket, prefix=scope.root)  # the state is stored
    summary = await asyncio.wait_for(client.get_workflow_handle(session_workflow_id(session_name)).result(), timeout=30)
    assert summary["closed_reason"] == "idle for 2s"
    assert await store.list_keys(bucket=store.bucket, prefix=scope.root) == []
    with pytest.raises(SessionClosed):
        await submit_cell(client, session_name, "big", task_queue=task_queue)
