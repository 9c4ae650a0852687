"""``git commit`` is not idempotent: it runs once for one call whatever happens to the worker.

SIGKILL the worker while the commit waits for a person: a new worker runs it after the
approval, once. SIGKILL the worker while the commit runs (a hook holds it): the next attempt
does not run it again (the code gets a TimeoutError saying so), and the repository has the
one commit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from codemode.worker.client.executions import start_execution
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.workflows.test_approval import wait_for_state

from .conftest import git, git_config

ROOT = Path(__file__).resolve().parents[2]
COMMIT = "git.add(pathspec='src/app.py')\nr = git.commit(message='Greet the world')\n[r['returncode'], git.log(max_count=1, format='%s')['stdout'].strip()]"


def spawn(address: str, task_queue: str, config: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/cli_tools/worker_proc.py"), address, task_queue, str(config)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


def kill(proc: subprocess.Popen | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


async def test_sigkill_while_the_commit_waits_for_approval(client, temporal_address, repo: Path, config_file) -> None:
    config = config_file(git_config(repo, approval={"commit": "always", "add": "never"}))
    before = int(git(repo, "rev-list", "--count", "HEAD"))
    task_queue = f"cli-crash-{uuid.uuid4().hex[:6]}"
    first = spawn(temporal_address, task_queue, config)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=COMMIT), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        kill(first)  # nothing is live while a run waits: no process holds it
        second = spawn(temporal_address, task_queue, config)
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    finally:
        kill(first)
        kill(second)
    assert outcome.success, outcome.error
    assert outcome.output == [0, "Greet the world"]
    assert int(git(repo, "rev-list", "--count", "HEAD")) == before + 1
    assert git(repo, "log", "-1", "--format=%s").strip() == "Greet the world"


async def test_sigkill_while_the_commit_runs_never_runs_it_twice(
    client, temporal_address, repo: Path, tmp_path: Path, config_file
) -> None:
    ran = tmp_path / "hook-ran"
    hook = repo / ".git" / "hooks" / "post-commit"
    hook.write_text(f"#!/bin/sh\necho ran >> {ran}\nsleep 5\n")  # the commit is made; the command lingers
    hook.chmod(0o755)
    config = config_file(git_config(repo, approval="never", timeout={"commit": 1.5}))
    before = int(git(repo, "rev-list", "--count", "HEAD"))
    code = "git.add(pathspec='src/app.py')\ntry:\n    git.commit(message='once')\nexcept TimeoutError as e:\n    lost = str(e)\nlost"
    task_queue = f"cli-crash-{uuid.uuid4().hex[:6]}"
    first = spawn(temporal_address, task_queue, config)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        deadline = time.monotonic() + 30
        while not ran.exists():  # the commit is made, its hook still running
            assert time.monotonic() < deadline, "the commit never ran"
            await asyncio.sleep(0.05)
        kill(first)
        second = spawn(temporal_address, task_queue, config)
        outcome = await asyncio.wait_for(handle.result(), 60)  # the lost attempt times out (1.5 s + 10 s)
    finally:
        kill(first)
        kill(second)
    assert outcome.success, outcome.error
    assert "not idempotent and may have run, so it is not run again" in outcome.output
    assert ran.read_text() == "ran\n"  # the command ran once
    assert int(git(repo, "rev-list", "--count", "HEAD")) == before + 1
    (commit,) = [c for c in outcome.tool_calls if c.tool == "cli:git/commit"]
    assert commit.status == "error" and commit.error.type == "TimeoutError" and commit.attempts == 2
