"""A tool's activity that also runs the sandbox step after its call (issue 11), driven as
Temporal runs it (``ActivityEnvironment``) with real Monty and a real checkpoint store.

The tool's result is final once the tool returned: a step that overruns its budget or fails
comes back in-band (``ToolOutput.unfused``), and the workflow's own step then redoes it from
the same checkpoint. The tool keeps its own timeout inside the longer activity.

A live CPython process (the python runtime, no checkpoint) is stepped only by the worker that
keeps it (issue 28), and a step there that overruns its budget is not cut short: the
workflow's own resume step, which comes to that worker's queue, takes its outcome."""

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
from codemode.activities.tool_activity import make_tool_activity
from codemode.runtimes import ExecutionLimits
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.monty import MontyRuntime
from codemode.runtimes.python import PythonRuntime
from codemode.storage import FileBlobStore

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
    out: ToolOutput = await _env().run(
        run_tool, ToolInput(call_id="1", args=[1], then=_then(step, 60), timeout_seconds=5)
    )
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
        ResumeInput(
            execution_id="exec-fused",
            runtime="monty",
            first_run_id="run-1",
            checkpoint=step.checkpoint,
            answers=[answer],
        ),
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


#: Between its two calls the code computes for about a second (real CPython).
PY_CODE = (
    "import time\na = await noop(1)\nt = time.perf_counter()\nn = 0\n"
    "while time.perf_counter() - t < 1.0:\n    n += 1\nb = await noop(2)\n[a, b, n > 0]"
)


@pytest.fixture
async def python_sandbox(tmp_path: Path):
    acts = SandboxActivities(
        ToolRegistry([noop]),
        CheckpointStore(FileBlobStore(tmp_path / "blobs")),
        runtimes={"python": PythonRuntime()},
        session_queue="own-queue",
    )
    try:
        yield acts
    finally:
        await acts.aclose()


async def _python_first_step(sandbox: SandboxActivities):
    start = StartInput(
        execution_id="exec-fused", runtime="python", code=PY_CODE, limits=ExecutionLimits(timeout_seconds=60)
    )
    step = await _env().run(sandbox.start, start)
    assert step.kind == "calls" and step.session_id and step.session_queue == "own-queue" and step.checkpoint is None
    return step


def _py_then(step, budget: float) -> NextStep:
    return NextStep(runtime="python", session_id=step.session_id, step_timeout=budget)


async def test_the_worker_keeping_a_live_process_runs_the_step_after_the_call(python_sandbox) -> None:
    RUNS.clear()
    step = await _python_first_step(python_sandbox)
    run_tool = make_tool_activity(python_sandbox.registry.select(["noop"])["noop"], python_sandbox)
    out: ToolOutput = await _env().run(
        run_tool, ToolInput(call_id="1", args=[1], then=_py_then(step, 60), timeout_seconds=5)
    )
    assert out.value == 1 and out.unfused is None
    assert out.step is not None and [c.args for c in out.step.calls] == [[2]]
    assert (
        out.step.session_id
        and out.step.session_id != step.session_id
        and python_sandbox.holds_process(out.step.session_id)
    )
    assert RUNS == [1]


async def test_a_live_process_elsewhere_is_left_to_the_workflow(python_sandbox, tmp_path: Path) -> None:
    RUNS.clear()
    step = await _python_first_step(python_sandbox)
    other = SandboxActivities(ToolRegistry([noop]), CheckpointStore(FileBlobStore(tmp_path / "other")))
    try:
        run_tool = make_tool_activity(other.registry.select(["noop"])["noop"], other)
        out: ToolOutput = await _env().run(
            run_tool, ToolInput(call_id="1", args=[1], then=_py_then(step, 60), timeout_seconds=5)
        )
    finally:
        await other.aclose()
    assert out.value == 1 and out.step is None
    assert out.unfused == "LookupError: the live sandbox is on another worker"
    # The workflow's own step, on the keeping worker's queue, answers the live process.
    answer = JournalEntry(call_id="1", function_name="noop", args=[1], result=1)
    again = await _env().run(
        python_sandbox.resume,
        ResumeInput(execution_id="exec-fused", runtime="python", session_id=step.session_id, answers=[answer]),
    )
    assert again.kind == "calls" and [c.args for c in again.calls] == [[2]] and again.via == "live"
    assert RUNS == [1]


async def test_a_live_step_over_its_budget_is_handed_to_the_workflows_step(python_sandbox) -> None:
    RUNS.clear()
    step = await _python_first_step(python_sandbox)
    run_tool = make_tool_activity(python_sandbox.registry.select(["noop"])["noop"], python_sandbox)
    out: ToolOutput = await _env().run(
        run_tool, ToolInput(call_id="1", args=[1], then=_py_then(step, 0.2), timeout_seconds=5)
    )
    assert out.value == 1 and out.step is None and out.unfused == "the step after the call took over 0.2s"
    assert python_sandbox.holds_process(step.session_id)  # still stepping it
    # The workflow's step for the same answer takes the outcome of the step already running:
    # the process is answered once and never rebuilt.
    answer = JournalEntry(call_id="1", function_name="noop", args=[1], result=1)
    again = await _env().run(
        python_sandbox.resume,
        ResumeInput(execution_id="exec-fused", runtime="python", session_id=step.session_id, answers=[answer]),
    )
    assert again.kind == "calls" and [c.args for c in again.calls] == [[2]] and again.via == "live"
    assert not python_sandbox.holds_process(step.session_id)
    last = await _env().run(
        python_sandbox.resume,
        ResumeInput(
            execution_id="exec-fused",
            runtime="python",
            session_id=again.session_id,
            answers=[JournalEntry(call_id=again.calls[0].call_id, function_name="noop", args=[2], result=2)],
        ),
    )
    assert last.kind == "result" and last.result is not None and last.result.output == [1, 2, True]
    assert RUNS == [1]
