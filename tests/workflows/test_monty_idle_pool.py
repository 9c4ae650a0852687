"""A worker lets its Monty processes go while runs wait (``runtimes/monty_pool.py``).

A burst of runs parks for approval; the pool grew to the burst and, once no sandbox has been
in use for ``CODEMODE_MONTY_IDLE_SECONDS``, the worker closes it: the processes it started
exit while the runs wait (issue 49: the parking worker held about 860 MB of idle Monty
processes). Approved, every run resumes from its checkpoint in a new pool and completes."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.runtimes.monty import MontyRuntime
from codemode.runtimes.monty_pool import idle_setting
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionOutcome

from .conftest import TOOLS_MODULE
from .test_approval import wait_for_state


def monty_children() -> set[int]:
    """This process's ``monty`` subprocesses (alive: a zombie does not count)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and stat[0] != "Z" and b"monty" in cmd:
            found.add(int(pid))
    return found


async def test_parked_runs_hold_no_monty_process_and_resume_in_a_new_pool(
    client, task_queue, events_file, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_MONTY_IDLE_SECONDS", "1")
    before = monty_children()
    # A parked run's live sandbox is let go after the keep-alive window, then the pool idles.
    worker = CodeModeWorker(
        client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, keep_alive_seconds=0.3
    )
    async with worker.running():
        rt = worker.sandbox.runtime("monty")
        assert isinstance(rt, MontyRuntime)
        handles = [
            await start_execution(
                client,
                CodeExecutionRequest(code=f"a = slow_step({i}, 0)\nr = transfer('ana', a + {i})\n[a, r['to']]"),
                task_queue=task_queue,
            )
            for i in range(8)
        ]
        waiting = [await wait_for_state(h, "awaiting_approval") for h in handles]
        started = monty_children() - before
        assert started, "the burst started Monty processes"
        for _ in range(300):  # closed a second after the last sandbox was returned
            if not rt._pool.open:
                break
            await asyncio.sleep(0.1)
        assert not rt._pool.open, f"the pool stayed open: {rt._pool._out} sessions out"
        await asyncio.sleep(0.5)  # (their exit is reaped by the pool's close)
        assert not (monty_children() & started), "the idle pool's processes exited while the runs wait"
        assert rt._pool.idle_closes >= 1
        for h, s in zip(handles, waiting, strict=True):
            await h.signal("approve", ApproveSignal(call_id=s.pending_approvals[0].call_id, by="ana"))
        outcomes = [await client.get_workflow_handle(h.id, result_type=ExecutionOutcome).result() for h in handles]
    assert [o.output for o in outcomes] == [[i * 10, "ana"] for i in range(8)], [o.error for o in outcomes]


def test_the_idle_setting_is_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEMODE_MONTY_IDLE_SECONDS", raising=False)
    assert idle_setting() == 60.0
    monkeypatch.setenv("CODEMODE_MONTY_IDLE_SECONDS", "0")
    assert idle_setting() == 0.0
    for bad in ("-1", "soon"):
        monkeypatch.setenv("CODEMODE_MONTY_IDLE_SECONDS", bad)
        with pytest.raises(ValueError, match="CODEMODE_MONTY_IDLE_SECONDS"):
            idle_setting()


async def test_a_step_cancelled_in_the_middle_gives_its_process_back(
    client, task_queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Monty step cancelled while its code runs (the run cancelled; or Core cancelling a
    local step when it evicts the run under cache pressure) used to keep its session out of
    the pool for good: the pool never idled and held its processes, 750 MB in a Monday
    benchmark with a small workflow cache, and each such step one process fewer for new runs."""
    monkeypatch.setenv("CODEMODE_MONTY_IDLE_SECONDS", "1")
    worker = CodeModeWorker(
        client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, keep_alive_seconds=0.3
    )
    async with worker.running():
        rt = worker.sandbox.runtime("monty")
        assert isinstance(rt, MontyRuntime)
        busy = "n = 0\nfor i in range(200_000_000):\n    n += i\nslow_step(n, 0)"  # seconds before its first call
        handle = await start_execution(client, CodeExecutionRequest(code=busy), task_queue=task_queue)
        for _ in range(100):  # its first step is under way
            if rt._pool._out:
                break
            await asyncio.sleep(0.05)
        assert rt._pool._out == 1
        await handle.cancel()
        # Closed with nothing out, in the end. Not at the first close: on a loaded machine Core
        # may evict the run in the middle of its step (its task took seconds) and, replaying
        # it, start the step again before the cancel in the history cancels that one too
        # (a full run here, beside a second suite, saw the pool close, then one session out).
        for _ in range(300):
            if not rt._pool.open and rt._pool._out == 0:
                break
            await asyncio.sleep(0.1)
        assert not rt._pool.open, f"the pool stayed open: {rt._pool._out} sessions out"
        assert rt._pool._out == 0
