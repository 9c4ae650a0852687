"""A predicate's answer is recorded with the call: after a SIGKILLed worker, the worker that
takes the run over replays it without asking the predicate again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.client.following import send_decision
from codemode.workflows.models import CodeExecutionRequest

from .test_decisions import parked

ROOT = Path(__file__).resolve().parents[2]


def spawn_worker(address: str, task_queue: str, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/approvals/worker_proc.py"), address, task_queue],
        env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


async def test_sigkilled_workers_replay_asks_the_predicate_nothing(
    client, temporal_address, task_queue, events_file, tmp_path
) -> None:
    asked = tmp_path / "predicate.jsonl"
    env = {"CODEMODE_TEST_PREDICATE": str(asked), "CODEMODE_TEST_EVENTS": str(events_file)}
    first = spawn_worker(temporal_address, task_queue, env)
    second = None
    try:
        code = "a = pay('ann', 20)\nb = pay('bob', 900)\n[a['amount'], b['amount']]"
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        assert len(asked.read_text().splitlines()) == 2
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn_worker(temporal_address, task_queue, env)
        # The new worker replays the run (an Update, or a signal when the dead worker's sticky
        # queue holds the task past the Update's wait: either way the new worker replays).
        await send_decision(handle, pending.call_id, approve=True, by="ana")
        outcome = await handle.result()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.output == [20, 900]
    assert len(asked.read_text().splitlines()) == 2  # asked once per call, never on replay
