"""Undo's histories replay (issue 47): every path a rollback takes, recorded through the workflow
(Monty and CPython) and replayed with temporalio's Replayer. With CODEMODE_RECORD_UNDO_HISTORIES=1
they are kept beside the committed ones (``histories/undo-*.json``), which test_replay.py replays
from then on: a later change that breaks a run of generation-47 mid-rollback fails there."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle, WorkflowHistory, WorkflowUpdateStage
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.undo import start_rollback
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import (
    CodeExecutionRequest,
    Decision,
    DenySignal,
    ExecutionStatus,
    RollbackRequest,
)

from .test_undo import THREE_THEN_PAYOUT

HISTORIES = Path(__file__).parent / "histories"

Act = Callable[[WorkflowHandle, ExecutionStatus], Awaitable[None]]


async def _deny_and_roll_back(handle: WorkflowHandle, status: ExecutionStatus) -> None:
    call = status.pending_approvals[0].call_id
    await handle.signal("deny", DenySignal(call_id=call, by="ops", reason="stop", rollback=True))


async def _rollback_update(handle: WorkflowHandle, status: ExecutionStatus) -> None:
    await handle.start_update("rollback", RollbackRequest(by="ops"), wait_for_stage=WorkflowUpdateStage.ACCEPTED)


async def _rollback_then_approve_undo(handle: WorkflowHandle, status: ExecutionStatus) -> None:
    await _rollback_update(handle, status)
    for _ in range(300):
        now = await handle.query("status", result_type=ExecutionStatus)
        if [p.call_id for p in now.pending_approvals] == ["undo-1"]:
            await handle.execute_update("decide", Decision(call_id="undo-1", approve=True, by="lead"))
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the compensation never waited")


async def _cancel(handle: WorkflowHandle, status: ExecutionStatus) -> None:
    await handle.cancel()


#: name -> (request, what a person does once the run waits; None: it runs to its end)
SCENARIOS: dict[str, tuple[CodeExecutionRequest, Act | None]] = {
    "deny_rollback": (CodeExecutionRequest(code=THREE_THEN_PAYOUT), _deny_and_roll_back),
    "rollback_failures": (
        CodeExecutionRequest(code="hold('a')\nlock('b')\nnote('c')\ntransfer('d', 1)\nask('go?')"),
        _rollback_update,
    ),
    "parallel_rollback": (
        CodeExecutionRequest(code="transfer('a', 1)\ntransfer('b', 2)\nask('go?')"),
        lambda h, s: h.start_update(
            "rollback", RollbackRequest(by="ops", order="parallel"), wait_for_stage=WorkflowUpdateStage.ACCEPTED
        ),
    ),
    "undo_approval": (CodeExecutionRequest(code="order('lamp')\nask('more?')"), _rollback_then_approve_undo),
    "on_failure": (
        CodeExecutionRequest(code="transfer('ann', 1)\ntransfer('bob', 2)\n1 / 0", on_failure="compensate"),
        None,
    ),
    "cancelled_compensate": (
        CodeExecutionRequest(code="transfer('ann', 1)\nask('x')", on_failure="compensate"),
        _cancel,
    ),
    "kept": (CodeExecutionRequest(code="transfer('ann', 1)\n'done'"), None),
}
PYTHON = ("deny_rollback", "on_failure")


@pytest.fixture
async def undo_worker(client, task_queue: str, tmp_path: Path, monkeypatch) -> AsyncIterator[CodeModeWorker]:
    monkeypatch.setenv("CODEMODE_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    w = CodeModeWorker(client, ToolRegistry.from_module("tests.workflows.undo_tools"), task_queue=task_queue)
    async with w.running():
        yield w


async def _record(client: Any, task_queue: str, name: str, runtime: str) -> list[tuple[str, WorkflowHistory]]:
    request, act = SCENARIOS[name]
    handle = await start_execution(client, request.model_copy(update={"runtime": runtime}), task_queue=task_queue)
    if act is not None:
        for _ in range(600):
            status = await handle.query("status", result_type=ExecutionStatus)
            if status.pending_approvals:
                break
            await asyncio.sleep(0.05)
        await act(handle, status)
    with contextlib.suppress(WorkflowFailureError):  # the cancelled one
        await asyncio.wait_for(handle.result(), 120)
    out = [(name, await handle.fetch_history())]
    if name == "kept":  # and its rollback after it ended: a run of its own
        rollback = await start_rollback(client, handle.id, by="ops")
        await asyncio.wait_for(rollback.result(), 120)
        out.append(("ended_rollback", await rollback.fetch_history()))
    return out


async def _replay(client: Any, recorded: list[tuple[str, WorkflowHistory]], prefix: str) -> None:
    if os.environ.get("CODEMODE_RECORD_UNDO_HISTORIES"):
        for name, history in recorded:
            (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())

    async def each() -> AsyncIterator[WorkflowHistory]:
        for _, history in recorded:
            yield history

    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}


async def test_undo_histories_replay(client, task_queue, undo_worker, events_file) -> None:
    recorded = [item for name in SCENARIOS for item in await _record(client, task_queue, name, "monty")]
    assert [n for n, _ in recorded] == [*SCENARIOS, "ended_rollback"]
    await _replay(client, recorded, "undo")


async def test_undo_python_histories_replay(client, task_queue, undo_worker, events_file) -> None:
    recorded = [item for name in PYTHON for item in await _record(client, task_queue, name, "python")]
    await _replay(client, recorded, "undopy")
