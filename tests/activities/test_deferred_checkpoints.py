"""Deferred checkpoints (issue 11), driven as Temporal runs the activities
(``ActivityEnvironment``) with real Monty and a real file store.

A step that waits for one call and has run briefly since the last saved checkpoint saves
none: the worker keeps the run live (``StepResult.live``) and the next call's activity
continues it there. The durable state is the checkpoint before (or the start) plus the
journal entries since, which the workflow holds; a worker without the live run leaves the
step to the workflow, whose own step rebuilds the run from them. These tests play the
workflow's part by hand, with two ``SandboxActivities`` standing for two workers that share
the store, on code that keeps a 1 MB heap and prints at every step."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from codemode.activities import ToolRegistry, live_runs, tool
from codemode.activities.checkpoints import CheckpointStore
from codemode.activities.models import (
    CHECKPOINT_REFUSED,
    NextStep,
    ReleaseInput,
    ResumeInput,
    StartInput,
    StepResult,
    ToolInput,
    ToolOutput,
)
from codemode.activities.sandbox_steps import SandboxActivities
from codemode.activities.tool_activity import make_tool_activity
from codemode.runtimes import ExecutionLimits
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.monty import MontyRuntime
from codemode.storage import FileBlobStore

RUNS: list[int] = []


@tool(timeout=timedelta(seconds=30))
async def noop(i: int) -> int:
    RUNS.append(i)
    return i * 10


N = 12
#: A 1 MB heap the checkpoints carry, a print and a call per step, a sum at the end.
CODE = f"""
heap = ['x' * 100 for _ in range(10_000)]
total = 0
for i in range({N}):
    print('step', i)
    total += await noop(i)
[total, len(heap)]
"""
EXEC = "exec-deferred"


def _env(execution_id: str = EXEC) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=execution_id, workflow_namespace="default")
    return env


@pytest.fixture
async def workers(tmp_path: Path):
    """Two workers' sandbox activities over one store."""
    store = FileBlobStore(tmp_path / "blobs")
    pair = [
        SandboxActivities(ToolRegistry([noop]), CheckpointStore(store), runtimes={"monty": MontyRuntime()})
        for _ in range(2)
    ]
    try:
        yield pair
    finally:
        for acts in pair:
            await acts.aclose()


def _checkpoints(tmp_path: Path) -> list[Path]:
    return [p for p in (tmp_path / "blobs").rglob("*") if p.is_file() and "/cp/" in str(p)]


class Driver:
    """The workflow's bookkeeping for deferred checkpoints, by hand: the checkpoint, the live
    key, the journal entries since the checkpoint and their bytes, the stdout."""

    def __init__(self, defer_bytes: int = 256 * 1024) -> None:
        self.defer_bytes = defer_bytes
        self.step: StepResult | None = None
        self.checkpoint = None
        self.superseded = None  # the checkpoint before: the next step deletes it
        self.tail: list[JournalEntry] = []
        self.tail_bytes = 0
        self.stdout = ""
        self.stdout_at_base = 0
        self.journal: list[JournalEntry] = []

    def take(self, step: StepResult) -> StepResult:
        self.stdout += step.stdout
        if step.deferred:
            step.checkpoint = self.checkpoint
            self.tail_bytes += step.deferred
        else:
            self.superseded = self.checkpoint
            self.checkpoint, self.tail, self.tail_bytes, self.stdout_at_base = step.checkpoint, [], 0, len(self.stdout)
        self.step = step
        return step

    def then(self) -> NextStep:
        assert self.step is not None
        return NextStep(
            runtime="monty",
            first_run_id="run-1",
            checkpoint=self.step.checkpoint,
            superseded=self.superseded if self.superseded != self.step.checkpoint else None,
            live=self.step.live,
            tail_entries=len(self.tail) if self.step.live else 0,  # (the workflow's count, before this answer)
            defer_bytes=self.defer_bytes - self.tail_bytes,
            step_timeout=60,
        )

    def answered(self, entry: JournalEntry) -> None:
        self.journal.append(entry)
        self.tail.append(entry)  # entries since the last saved checkpoint (its own call's answer first)


async def _start(acts: SandboxActivities, driver: Driver, *, defer: bool = True) -> StepResult:
    start = StartInput(
        execution_id=EXEC,
        runtime="monty",
        code=CODE,
        first_run_id="run-1",
        limits=ExecutionLimits(timeout_seconds=60),
        defer_bytes=driver.defer_bytes if defer else 0,
    )
    return driver.take(await _env().run(acts.start, start))


async def _call(acts: SandboxActivities, driver: Driver) -> ToolOutput:
    assert driver.step is not None
    (call,) = driver.step.calls
    run_tool = make_tool_activity(acts.registry.select(["noop"])["noop"], acts)
    out: ToolOutput = await _env().run(
        run_tool, ToolInput(call_id=call.call_id, args=call.args, then=driver.then(), timeout_seconds=30)
    )
    driver.answered(JournalEntry(call_id=call.call_id, function_name="noop", args=call.args, result=out.value))
    return out


async def test_steps_keep_the_run_live_and_save_no_checkpoint(workers, tmp_path: Path) -> None:
    RUNS.clear()
    a, _ = workers
    driver = Driver()
    first = await _start(a, driver)
    # The start ran the 1 MB heap build: past DEFER_SECONDS or not, it is a live run or a checkpoint.
    saved_at_start = first.checkpoint is not None
    while driver.step.kind == "calls":
        out = await _call(a, driver)
        assert out.unfused is None and out.step is not None
        driver.take(out.step)
    assert driver.step.kind == "result" and driver.step.result.output == [10 * sum(range(N)), 10_000]
    assert driver.stdout == "".join(f"step {i}\n" for i in range(N))
    assert RUNS == list(range(N))
    # Every step after the start ran on from the live run: nothing but the start's checkpoint
    # (if it saved one) was ever written, and the end freed it.
    assert a.live_sessions == 0 and not _checkpoints(tmp_path)
    assert saved_at_start or first.live is not None


async def test_the_byte_budget_makes_a_step_save(workers, tmp_path: Path) -> None:
    RUNS.clear()
    a, _ = workers
    driver = Driver(defer_bytes=25)  # about two calls: each adds ~10 bytes (arguments and result)
    await _start(a, driver)
    saved = 0
    while driver.step.kind == "calls":
        out = await _call(a, driver)
        assert out.step is not None
        saved += out.step.deferred == 0 and out.step.kind == "calls"
        assert driver.tail_bytes + out.step.deferred <= 25
        driver.take(out.step)
    assert driver.step.result.output[0] == 10 * sum(range(N))
    assert saved >= N // 3  # every few calls the tail is full and the step saves


@pytest.mark.parametrize("start_saves", [True, False], ids=["from-a-checkpoint", "from-the-start"])
async def test_another_worker_leaves_the_step_to_the_workflow_which_rebuilds_the_run(
    workers, tmp_path: Path, start_saves: bool
) -> None:
    RUNS.clear()
    a, b = workers
    driver = Driver()
    first = await _start(a, driver, defer=not start_saves)
    assert (first.checkpoint is not None) == start_saves and (first.live is None) == start_saves
    for _ in range(5):  # five calls on worker a: the run is live there, the tail grows
        driver.take((await _call(a, driver)).step)
    assert driver.step.live is not None
    # The sixth call's activity lands on worker b: the tool runs (once), the step cannot.
    out = await _call(b, driver)
    assert out.step is None and "not on this worker" in (out.unfused or "")
    assert RUNS == [0, 1, 2, 3, 4, 5]
    # The workflow's own step on b: the checkpoint before (or the start) plus the entries since.
    answer = driver.journal[-1]
    resume = ResumeInput(
        execution_id=EXEC,
        runtime="monty",
        first_run_id="run-1",
        checkpoint=driver.step.checkpoint,
        live=driver.step.live,
        answers=[answer],
        stdout_offset=len(driver.stdout),
    )
    if driver.step.checkpoint is not None:
        resume.tail = driver.tail[:-1]
        resume.tail_entries = len(resume.tail)
        resume.base_stdout = len(driver.stdout) - driver.stdout_at_base
    else:  # the start deferred too: the journal from the start (the workflow's _with_journal)
        resume.start = StartInput(
            execution_id=EXEC, runtime="monty", code=CODE, first_run_id="run-1", limits=ExecutionLimits(timeout_seconds=60)
        )
        resume.journal = list(driver.journal)
    step = driver.take(await _env().run(b.resume, resume))
    assert step.kind == "calls" and [c.args for c in step.calls] == [[6]]
    assert step.via == ("restored" if start_saves else "replayed")
    assert step.checkpoint is not None and not step.deferred
    # Replayed code printed its steps again: only the new one is reported.
    assert driver.stdout == "".join(f"step {i}\n" for i in range(7))
    while driver.step.kind == "calls":
        driver.take((await _call(b, driver)).step)
    assert driver.step.result.output[0] == 10 * sum(range(N))
    assert driver.stdout == "".join(f"step {i}\n" for i in range(N))
    assert RUNS == list(range(N))  # no tool ran twice


async def test_a_fused_step_without_the_entries_refuses_rather_than_guess(workers) -> None:
    a, b = workers
    driver = Driver()
    await _start(a, driver)
    for _ in range(2):
        driver.take((await _call(a, driver)).step)
    resume = driver.then().resume_input(EXEC, JournalEntry(call_id="x", function_name="noop", args=[2], result=20))
    with pytest.raises(ApplicationError) as caught:
        await _env().run(b.resume, resume)
    assert caught.value.type == CHECKPOINT_REFUSED and caught.value.non_retryable


async def test_a_step_that_computed_for_long_saves_its_checkpoint(workers, tmp_path: Path) -> None:
    a, _ = workers
    code = "a = await noop(1)\nx = 0\nfor i in range(3_000_000):\n    x += i\nb = await noop(2)\n[a, b]"
    driver = Driver()
    start = StartInput(
        execution_id=EXEC, runtime="monty", code=code, first_run_id="run-1",
        limits=ExecutionLimits(timeout_seconds=60), defer_bytes=driver.defer_bytes,
    )
    driver.take(await _env().run(a.start, start))
    out = await _call(a, driver)  # about a second of compute after it: over DEFER_SECONDS
    assert out.step is not None and out.step.kind == "calls" and not out.step.deferred
    assert out.step.checkpoint is not None and _checkpoints(tmp_path)


@pytest.mark.parametrize("cache, hot", [(1, True), (2, True), (1, False)], ids=["one-hot", "two-hot", "one-cold"])
async def test_a_live_run_the_cache_lets_go_is_spilled_and_restored_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: int, hot: bool
) -> None:
    """More deferred runs than the cache holds: the one it lets go is dumped to the store, and
    its next step on this worker restores it (no rebuild by the workflow); the spill is
    deleted once restored. While the cached runs are hot (they step again soon), the newcomer
    is let go and the residents keep hitting; once the oldest is cold, it is let go (LRU)."""
    if not hot:
        monkeypatch.setattr(live_runs, "HOT_SECONDS", 0.0)
    RUNS.clear()
    acts = SandboxActivities(
        ToolRegistry([noop]),
        CheckpointStore(FileBlobStore(tmp_path / "blobs")),
        runtimes={"monty": MontyRuntime()},
        snapshot_cache_size=cache,
    )
    ids = ["exec-a", "exec-b", "exec-c"]
    drivers = {i: Driver() for i in ids}
    try:
        for i in ids:
            start = StartInput(
                execution_id=i, runtime="monty", code=CODE, first_run_id="run-1",
                limits=ExecutionLimits(timeout_seconds=60), defer_bytes=drivers[i].defer_bytes,
            )
            drivers[i].take(await _env(i).run(acts.start, start))
        vias = []
        for _ in range(N):  # round robin: each step finds its run evicted by the others
            for i in ids:
                d = drivers[i]
                (call,) = d.step.calls
                run_tool = make_tool_activity(acts.registry.select(["noop"])["noop"], acts)
                out: ToolOutput = await _env(i).run(
                    run_tool, ToolInput(call_id=call.call_id, args=call.args, then=d.then(), timeout_seconds=30)
                )
                assert out.unfused is None and out.step is not None
                d.answered(JournalEntry(call_id=call.call_id, function_name="noop", args=call.args, result=out.value))
                vias.append(out.step.via)
                d.take(out.step)
        for d in drivers.values():
            assert d.step.kind == "result" and d.step.result.output == [10 * sum(range(N)), 10_000]
            assert d.stdout == "".join(f"step {i}\n" for i in range(N))
        assert sorted(RUNS) == sorted(list(range(N)) * 3)
        restored, hits = vias.count("restored"), vias.count("live")
        if hot:  # the residents hit on every step; the others are restored on every step
            assert hits >= cache * (N - 1) and restored <= (3 - cache) * (N + 1), vias
        else:  # round robin over LRU: each step finds its run let go by the others
            assert restored >= 2 * N, vias  # (the step that ends the code reports "restored" too)
    finally:
        await acts.aclose()
    assert not _checkpoints(tmp_path)  # every spill was deleted once restored


async def test_release_frees_a_deferred_run_held_or_spilled(tmp_path: Path) -> None:
    """An execution that ends (cancelled, failed) while deferred: the release closes the live
    run this worker holds, or deletes the spill the cache made of it."""
    acts = SandboxActivities(
        ToolRegistry([noop]),
        CheckpointStore(FileBlobStore(tmp_path / "blobs")),
        runtimes={"monty": MontyRuntime()},
        snapshot_cache_size=1,
    )
    try:
        steps = {}
        for i in ("exec-a", "exec-b"):  # one of the two is spilled (b: a is hot)
            start = StartInput(
                execution_id=i, runtime="monty", code=CODE, first_run_id="run-1",
                limits=ExecutionLimits(timeout_seconds=60), defer_bytes=256 * 1024,
            )
            steps[i] = await _env(i).run(acts.start, start)
            assert steps[i].live is not None and steps[i].checkpoint is None
        await asyncio.sleep(0.2)  # the spill is written in the background
        assert len(_checkpoints(tmp_path)) == 1
        for i, step in steps.items():
            await _env(i).run(
                acts.release, ReleaseInput(execution_id=i, runtime="monty", first_run_id="run-1", live=step.live)
            )
        assert not _checkpoints(tmp_path) and not acts._snapshots and not acts._spilled
    finally:
        await acts.aclose()


async def test_a_worker_keeps_live_all_but_two_of_the_monty_pool(tmp_path: Path) -> None:
    """How many runs a worker keeps live follows Monty's pool (``CODEMODE_MONTY_PROCESSES``):
    all but two of its processes, so new steps always find one; one more is spilled (the
    newcomer, as the others stepped a moment ago)."""
    acts = SandboxActivities(
        ToolRegistry([noop]),
        CheckpointStore(FileBlobStore(tmp_path / "blobs")),
        runtimes={"monty": MontyRuntime(max_processes=5)},
    )
    try:
        for i in ("exec-a", "exec-b", "exec-c", "exec-d"):
            start = StartInput(
                execution_id=i, runtime="monty", code=CODE, first_run_id="run-1",
                limits=ExecutionLimits(timeout_seconds=60), defer_bytes=256 * 1024,
            )
            assert (await _env(i).run(acts.start, start)).live is not None
        await asyncio.sleep(0.2)  # the spill is written in the background
        assert len(acts._snapshots) == 3
        assert len(_checkpoints(tmp_path)) == 1  # exec-d's run, spilled
    finally:
        await acts.aclose()
