"""Runs of any length: on a dev server whose limits are lowered with --dynamic-config-value
(continue-as-new suggested at 150 events / 150 KB, and the hard limits at 600 events / 2 MB),
long executions roll over many times and still finish, with an approval parked in a later
run honoured, a gathered batch larger than the call window, and an audit that shows every
call once. No run ever hits a limit."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes import ExecutionLimits
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionStatus

from .conftest import TOOLS_MODULE
from .history_checks import chain_stats

LIMITS = {
    "limit.historyCount.suggestContinueAsNew": 150,
    "limit.historySize.suggestContinueAsNew": 150_000,
    "limit.historyCount.error": 600,
    "limit.historySize.error": 2_000_000,
}
LONG = ExecutionLimits(max_tool_calls=5000, timeout_seconds=300)
SEQUENTIAL = """
t = 0
for i in range(N):
    t = add(t, i)
rows = fetch_rows(40000)
r = transfer('bob', t)
[t, len(rows), r['to']]
"""
GATHERED = """
import asyncio
xs = await asyncio.gather(*[fetch(i) for i in range(200)])
sum(xs)
"""


async def _aiter(items):
    for item in items:
        yield item


@pytest.fixture(scope="module")
async def small_env(converter) -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment(data_converter=converter, dynamic_config=LIMITS)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="module")
async def small_client(small_env: WorkflowEnvironment) -> AsyncIterator[Client]:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(small_env.client, registry, task_queue="small").running():
        yield small_env.client


async def _approve_when_parked(client: Client, execution_id: str) -> ExecutionStatus:
    handle = client.get_workflow_handle(execution_id)
    for _ in range(1200):
        status = await handle.query("status", result_type=ExecutionStatus)
        if status.pending_approvals:
            await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="ana"))
            return status
        await asyncio.sleep(0.1)
    raise AssertionError("never parked")


@pytest.mark.parametrize(("runtime", "calls"), [("monty", 400), ("python", 150)])
async def test_long_runs_roll_over_and_finish(small_client, runtime, calls) -> None:
    request = CodeExecutionRequest(code=SEQUENTIAL.replace("N", str(calls)), runtime=runtime, limits=LONG)
    handle = await start_execution(small_client, request, task_queue="small")
    parked = await _approve_when_parked(small_client, handle.id)
    assert parked.runs > 2  # the approval was parked in a later run of the chain
    assert parked.call_count == calls + 2
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [calls * (calls - 1) // 2, 40000, "bob"]
    assert outcome.runs == parked.runs and len(outcome.tool_calls) == calls + 2
    assert outcome.tool_calls[-1].approval.by == "ana"

    stats = await chain_stats(small_client, handle.id)
    assert stats.runs == outcome.runs
    assert stats.largest_run_events < LIMITS["limit.historyCount.error"]
    assert stats.largest_run_bytes < LIMITS["limit.historySize.error"]
    audit = await fetch_audit(small_client, handle.id)
    ids = [c.call_id for c in audit.calls]
    assert len(ids) == len(set(ids)) == calls + 2  # every call once, across every run
    assert {c.status for c in audit.calls} == {"ok"}
    lines = display.audit_lines(audit)
    assert sum("continued as new" in ln for ln in lines) == outcome.runs - 1
    assert sum("⚖" in ln and "approved by ana" in ln for ln in lines) == 1
    # Every run of the chain replays deterministically (the first from the request, the
    # others from the state the run before carried).
    histories = [
        await small_client.get_workflow_handle(handle.id, run_id=run).fetch_history() for run in audit.runs
    ]
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=small_client.data_converter)
    results = await replayer.replay_workflows(_aiter(histories), raise_on_replay_failure=False)
    assert not results.replay_failures


async def test_a_gathered_batch_larger_than_a_run(small_client) -> None:
    request = CodeExecutionRequest(code=GATHERED, limits=LONG)
    handle = await start_execution(small_client, request, task_queue="small")
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == sum(i + 100 for i in range(200))
    assert outcome.runs > 1  # the batch's windows were spread over several runs
    stats = await chain_stats(small_client, handle.id)
    assert stats.largest_run_events < LIMITS["limit.historyCount.error"]
