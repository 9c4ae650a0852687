"""What the SIGKILL tests share (tests/workflows/test_crash.py, tests/snippets/test_crash.py): a
worker process to kill, the moment to kill it (some calls ended, one inside its tool), and the
check that no logical call ran twice."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .conftest import read_events

ROOT = Path(__file__).resolve().parents[2]


def spawn_worker(address: str, task_queue: str, events: Path, **env: str) -> subprocess.Popen:
    """``tests/workflows/worker_proc.py`` on ``task_queue``, its tools' events in ``events``."""
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/workflows/worker_proc.py"), address, task_queue],
        env={**os.environ, "CODEMODE_TEST_EVENTS": str(events), "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


async def kill_mid_call(proc: subprocess.Popen, events: Path, ended: int) -> tuple[float, int]:
    """SIGKILL ``proc`` once ``ended`` calls have ended and one is inside its tool right now;
    (when, its pid)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = read_events(events)
        ends = {(e["execution_id"], e["call_id"], e["attempt"]) for e in seen if e["event"] == "end"}
        inflight = [
            e for e in seen if e["event"] == "start" and (e["execution_id"], e["call_id"], e["attempt"]) not in ends
        ]
        if len(ends) >= ended and inflight:
            break
        await asyncio.sleep(0.02)
    else:
        raise AssertionError("the executions never got going")
    killed_at = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return killed_at, proc.pid


def check_no_call_twice(events: list[dict[str, Any]], calls: int, killed_pid: int, killed_at: float) -> dict:
    """One logical call (an execution's call of one argument) ran under exactly one call id, and
    an attempt is repeated only when it never finished: every attempt but the last was cut off by
    the kill, inside the tool (no end) or while its completion was on its way to the server (its
    end written by the killed worker just before the kill). Returns the attempts of each call
    ((execution id, call id) -> attempt -> its events); at least one call was retried."""
    ids_per_call = collections.defaultdict(set)
    for e in events:
        ids_per_call[(e["execution_id"], e["arg"])].add(e["call_id"])
    assert len(ids_per_call) == calls
    assert all(len(ids) == 1 for ids in ids_per_call.values()), ids_per_call
    attempts: dict = collections.defaultdict(dict)
    for e in events:
        attempts[(e["execution_id"], e["call_id"])].setdefault(e["attempt"], []).append(e)
    repeated = 0
    for key, by_attempt in attempts.items():
        numbers = sorted(by_attempt)
        assert {e["event"] for e in by_attempt[numbers[-1]]} == {"start", "end"}, (key, by_attempt)
        for n in numbers[:-1]:
            assert all(e["pid"] == killed_pid for e in by_attempt[n]), (key, by_attempt)
            ends = [e for e in by_attempt[n] if e["event"] == "end"]
            assert not ends or ends[0]["t"] >= killed_at - 0.25, (key, by_attempt)
        repeated += len(numbers) - 1
    assert repeated >= 1  # the call cut off by the kill really was retried
    return attempts
