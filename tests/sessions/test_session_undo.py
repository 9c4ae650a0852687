"""A session rolled back to before a cell (issue 47): the calls of that cell and every later one
are compensated, newest cell first, and the namespace is as it was before it (the next cell
rebuilds it from the earlier cells). Real server and worker, Monty and CPython."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.client.sessions import close_session, describe_session, run_cell
from codemode.client.undo import RollbackRefused, roll_back_session
from codemode.worker.worker import CodeModeWorker

from ..workflows.conftest import read_events


@pytest.fixture
async def undo_worker(client, task_queue: str, tmp_path: Path, monkeypatch) -> AsyncIterator[CodeModeWorker]:
    monkeypatch.setenv("CODEMODE_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    w = CodeModeWorker(client, ToolRegistry.from_module("tests.workflows.undo_tools"), task_queue=task_queue)
    async with w.running():
        yield w


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_roll_back_to_before_a_cell(client, task_queue, undo_worker, events_file, session_name, runtime) -> None:
    async def cell(code: str):
        outcome = await run_cell(client, session_name, code, runtime=runtime, task_queue=task_queue)
        assert outcome.success, outcome.error
        return outcome

    await cell("a = transfer('ann', 1)['to']\nbalance = 1")
    await cell("b = transfer('bob', 2)['to']\nbalance = balance + 2")
    await cell("c = transfer('cy', 3)['to']\nd = transfer('dee', 4)['to']\nbalance = balance + 7")
    for _ in range(100):  # the session records a cell's end a moment after its caller has it
        status = await describe_session(client, session_name)
        if status.running is None:
            break
        await asyncio.sleep(0.05)
    with pytest.raises(RollbackRefused, match="there is no cell 9"):
        await roll_back_session(client, session_name, 9, by="ops")

    done = await asyncio.wait_for(roll_back_session(client, session_name, 2, by="ops", reason="wrong payees"), 120)
    assert [c.index for c in done.cells] == [3, 2]
    assert [[(e.call_id, e.state) for e in c.undo.entries] for c in done.cells] == [
        [("1", "compensated"), ("2", "compensated")],
        [("1", "compensated")],
    ]
    assert done.cells[0].rollback_id == f"rollback:session:{session_name}:3"
    assert [e["to"] for e in read_events(events_file) if e["event"] == "compensated"] == ["dee", "cy", "bob"]
    assert "cells 1" in done.namespace
    # The namespace is as it was after cell 1: cell 2's and 3's names are gone, cell 1's stay.
    after = await cell("[a, balance, 'b' in dir(), 'c' in dir()]" if runtime == "python" else "[a, balance]")
    assert after.output[:2] == ["ann", 1]
    if runtime == "python":
        assert after.output[2:] == [False, False]
    # Cell 1's transfer ran once: the rebuild replayed its recorded result.
    assert [e["to"] for e in read_events(events_file) if e["event"] == "call"] == ["ann", "bob", "cy", "dee"]
    await close_session(client, session_name)
    with pytest.raises(RollbackRefused, match="no open session"):
        await roll_back_session(client, session_name, 1, by="ops")
