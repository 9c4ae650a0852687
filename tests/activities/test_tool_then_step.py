"""A tool's activity that also runs the sandbox step after its call (issue 11), driven as
Temporal runs it (``ActivityEnvironment``) with real Monty and a real checkpoint store.

The tool's result is final once the tool returned: a step that overruns its budget or fails
comes back in-band (``ToolOutput.unfused``), and the workflow's own step then redoes it from
the same checkpoint. The tool keeps its own timeout inside the longer activity."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from codemode.activities import ToolRegistry, tool
from codemode.activities.checkpoints import CheckpointStore
from codemode.activities.models import NextStep, ResumeInput, StartInput, ToolInput, ToolOutput
from codemode.activities.sandbox_steps import SandboxActivities
from codemode.activities.storage import FileBlobStore
from codemode.activities.tool_activity import make_tool_activity
from codemode.runtimes import ExecutionLimits
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.monty import MontyRuntime

RUNS: list[int] = []


async def noop(i: int) -> int:
    RUNS.append(i)
    return i


@tool(timeout=timedelta(seconds=30))
async def sleepy(seconds: float) -> float:
    await asyncio.sleep(seconds)
    return seconds


async def gives_up() -> int:
    raise TimeoutError("upstream took too long")


#: Between its two calls the code computes for a while (about a second in Monty).
CODE = "a = await noop(1)\nx = 0\nfor i in range(3_000_000):\n    x += i\nb = await noop(2)\n[a, b, x]"


@pytest.fixture
async def sandbox(tmp_path: Path):
    registry = ToolRegistry([noop, sleepy, gives_up])
    acts = SandboxActivities(
        registry, CheckpointStore(FileBlobStore(tmp_path / "blobs")), runtimes={"monty": MontyRuntime()}
    )
    try:
        yield acts
    finally:
        await acts.aclose()


def _env() -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id="exec-fused", workflow_namespace="default")
    return env


async def _first_step(sandbox: SandboxActivities):
    start = StartInput(
        execution_id="exec-fused",
        runtime="monty",
        code=CODE,
        first_run_id="run-1",
        limits=ExecutionLimits(timeout_seconds=60),
    )
    step = await _env().run(sandbox.start, start)
    assert step.kind == "calls" and [c.args for c in step.calls] == [[1]] and step.checkpoint is not None
    return step


def _then(step, budget: float) -> NextStep:
    return NextStep(runtime="monty", first_run_id="run-1", checkpoint=step.checkpoint, step_timeout=budget)


async def test_the_step_after_the_call_comes_back_with_the_result(sandbox: SandboxActivities) -> None:
    RUNS.clear()
    step = await _first_step(sandbox)
    run_tool = make_tool_activity(sandbox.registry.select(["noop"])["noop"], sandbox)
    out: ToolOutput = await _env().run(run_tool, ToolInput(call_id="1", args=[1], then=_then(step, 60), timeout_seconds=5))
    assert out.value == 1 and out.unfused is None
    assert out.step is not None and out.step.kind == "calls" and [c.args for c in out.step.calls] == [[2]]
    assert out.step.checkpoint is not None and out.step.checkpoint != step.checkpoint
    assert RUNS == [1]


async def test_a_step_over_its_budget_is_left_to_the_workflow_and_the_tool_stands(sandbox: SandboxActivities) -> None:
    RUNS.clear()
    step = await _first_step(sandbox)
    run_tool = make_tool_activity(sandbox.registry.select(["noop"])["noop"], sandbox)
    out: ToolOutput = await _env().run(
        run_tool, ToolInput(call_id="1", args=[1], then=_then(step, 0.05), timeout_seconds=5)
    )
    assert out.value == 1 and out.step is None
    assert out.unfused == "the step after the call took over 0.05s"
    # The workflow's own step redoes it from the same checkpoint, with the recorded answer.
    answer = JournalEntry(call_id="1", function_name="noop", args=[1], result=1)
    again = await _env().run(
        sandbox.resume,
        ResumeInput(execution_id="exec-fused", runtime="monty", first_run_id="run-1", checkpoint=step.checkpoint,
                    answers=[answer]),
    )
    assert again.kind == "calls" and [c.args for c in again.calls] == [[2]]
    assert RUNS == [1]  # the tool ran once


async def test_a_tool_without_a_sandbox_worker_returns_its_result_alone(sandbox: SandboxActivities) -> None:
    step = await _first_step(sandbox)
    tools_only = make_tool_activity(sandbox.registry.select(["noop"])["noop"], None)
    out: ToolOutput = await _env().run(tools_only, ToolInput(call_id="1", args=[1], then=_then(step, 60)))
    assert out.value == 1 and out.step is None and out.unfused == "this worker runs tools only"


async def test_the_tool_keeps_its_own_timeout_inside_the_longer_activity(sandbox: SandboxActivities) -> None:
    step = await _first_step(sandbox)
    run_tool = make_tool_activity(sandbox.registry.select(["sleepy"])["sleepy"], sandbox)
    with pytest.raises(ApplicationError) as caught:
        await _env().run(run_tool, ToolInput(call_id="1", args=[5.0], then=_then(step, 60), timeout_seconds=0.2))
    assert caught.value.type == "TimeoutError" and not caught.value.non_retryable
    assert caught.value.message == "sleepy timed out after 0.2s (attempt 1)"


async def test_a_timeout_the_tool_raises_itself_stays_its_own(sandbox: SandboxActivities) -> None:
    step = await _first_step(sandbox)
    run_tool = make_tool_activity(sandbox.registry.select(["gives_up"])["gives_up"], sandbox)
    with pytest.raises(ApplicationError) as caught:
        await _env().run(run_tool, ToolInput(call_id="1", then=_then(step, 60), timeout_seconds=30))
    assert caught.value.type == "TimeoutError" and caught.value.message == "upstream took too long"
