"""Undo when workers die (issue 47). A worker SIGKILLed in the middle of a rollback: a new worker
finishes it and every compensation ran to its end exactly once. A worker SIGKILLed while tools
ran: the calls it cut off are indeterminate; a tool's reconcile decides whether each was applied
before anything compensates it, and without a reconcile the call is reported, never compensated
blindly."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from codemode.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest, DenySignal

from .conftest import read_events
from .test_approval import wait_for_state
from .test_undo import THREE_THEN_PAYOUT

ROOT = Path(__file__).resolve().parents[2]


def spawn(address: str, task_queue: str, events: Path, ledger: Path, **env: str) -> subprocess.Popen:
    environ = {
        **os.environ,
        "CODEMODE_TEST_EVENTS": str(events),
        "CODEMODE_TEST_LEDGER": str(ledger),
        "CODEMODE_TEST_TOOLS": "tests.workflows.undo_tools",
        "PYTHONPATH": str(ROOT),
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/workflows/worker_proc.py"), address, task_queue],
        env=environ,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def stop(*procs: subprocess.Popen | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


async def until(events: Path, predicate, what: str, seconds: float = 60) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = read_events(events)
        if predicate(found):
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"never saw {what}: {read_events(events)}")


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.jsonl"


@pytest.mark.slow  # two worker processes and a lost attempt's timeout: ~35 s on 2 loaded cores
async def test_sigkill_during_rollback_compensates_each_call_once(
    client, temporal_address, task_queue, events_file, ledger
) -> None:
    # Each refund takes a while, so the worker dies inside one of them.
    first = spawn(temporal_address, task_queue, events_file, ledger, UNDO_SECONDS="1.0")
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=THREE_THEN_PAYOUT), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval", timeout=60)
        await handle.signal(
            "deny", DenySignal(call_id=status.pending_approvals[0].call_id, by="ops", reason="stop", rollback=True)
        )
        # Killed once the newest call's refund is done and the next one is inside its compensation.
        await until(
            events_file,
            lambda es: (
                any(e["event"] == "compensated" and e["to"] == "cy" for e in es)
                and any(e["event"] == "compensate" and e["to"] == "bob" for e in es)
            ),
            "the second compensation under way",
        )
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn(temporal_address, task_queue, events_file, ledger)
        outcome = await asyncio.wait_for(handle.result(), 120)
    finally:
        stop(first, second)
    assert [(e.call_id, e.state) for e in outcome.undo.entries] == [
        ("1", "compensated"),
        ("2", "compensated"),
        ("3", "compensated"),
    ]
    events = read_events(events_file)
    finished = collections.Counter(e["to"] for e in events if e["event"] == "compensated")
    assert finished == {"cy": 1, "bob": 1, "ann": 1}
    # The one the kill cut off started twice (its first attempt lost with the worker), under one key.
    started = collections.defaultdict(set)
    for e in events:
        if e["event"] == "compensate":
            started[e["to"]].add((e["key"], e["pid"], e["attempt"]))
    assert len(started["bob"]) == 2 and len({k for k, _, _ in started["bob"]}) == 1
    assert [e["to"] for e in events if e["event"] == "compensated"] == ["cy", "bob", "ann"]
    refunds = [line for line in ledger.read_text().splitlines() if '"refund"' in line]
    assert len(refunds) == 3


GATHERED = """
import asyncio
await asyncio.gather(book("a", 30, True), book("b", 30, False), book_blind("c", 30))
"""


async def test_calls_a_crash_cut_off_are_reconciled_never_compensated_blindly(
    client, temporal_address, task_queue, events_file, ledger
) -> None:
    first = spawn(temporal_address, task_queue, events_file, ledger)
    second = None
    try:
        request = CodeExecutionRequest(code=GATHERED, on_failure="compensate")
        handle = await start_execution(client, request, task_queue=task_queue)
        await until(events_file, lambda es: len([e for e in es if e["event"] == "call"]) == 3, "three calls under way")
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn(temporal_address, task_queue, events_file, ledger)
        outcome = await asyncio.wait_for(handle.result(), 120)
    finally:
        stop(first, second)
    assert not outcome.success and outcome.error is not None and outcome.error.type == "TimeoutError"
    entries = {e.kwargs.get("slot") or e.args[0]: e for e in outcome.undo.entries}
    # a: applied before the crash; its reconcile says so, and it is compensated.
    assert entries["a"].reconciled == "applied" and entries["a"].state == "compensated"
    # b: never applied; its reconcile says so, nothing to undo.
    assert entries["b"].reconciled == "not_applied" and entries["b"].state == "nothing_to_do"
    # c: no reconcile: reported as it is, with why; its compensation never ran.
    assert entries["c"].state == "indeterminate" and "timed out" in (entries["c"].why or "")
    events = read_events(events_file)
    assert sorted(e["slot"] for e in events if e["event"] == "reconcile") == ["a", "b"]
    assert [e["slot"] for e in events if e["event"] == "compensate"] == ["a"]
