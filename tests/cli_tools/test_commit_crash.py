"""``git commit`` is not idempotent: it runs once for one call whatever happens to the worker.

SIGKILL the worker while the commit waits for a person: a new worker runs it after the
approval, once. SIGKILL the worker while the commit runs (a hook holds it): the next attempt
does not run it again (the code gets a TimeoutError saying so), and the repository has the
one commit."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.cli.runner import Background, base_env
from tests.workflows.test_approval import wait_for_state

from .conftest import git, git_config

COMMIT = "git.add(pathspec='src/app.py')\nr = git.commit(message='Greet the world')\n[r['returncode'], git.log(max_count=1, format='%s')['stdout'].strip()]"


async def spawn(address: str, task_queue: str, config: Path) -> Background:
    """`codemode worker --cli-config FILE`, as a user starts it, in a process a test can SIGKILL."""
    env = base_env(TEMPORAL_ADDRESS=address, CODEMODE_TASK_QUEUE=task_queue, CODEMODE_DATA_DIR=str(config.parent))
    log = config.parent / f"worker-{uuid.uuid4().hex[:6]}.log"
    return await Background("worker", "--cli-config", str(config), env=env, log=log).start("Worker ready")


async def kill(worker: Background | None) -> None:
    if worker is not None and worker.proc is not None and worker.proc.returncode is None:
        worker.proc.kill()
        await worker.proc.wait()


async def test_sigkill_while_the_commit_waits_for_approval(client, temporal_address, repo: Path, config_file) -> None:
    config = config_file(git_config(repo, approval={"commit": "always", "add": "never"}))
    before = int(git(repo, "rev-list", "--count", "HEAD"))
    task_queue = f"cli-crash-{uuid.uuid4().hex[:6]}"
    first = await spawn(temporal_address, task_queue, config)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=COMMIT), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        await kill(first)  # nothing is live while a run waits: no process holds it
        second = await spawn(temporal_address, task_queue, config)
        await handle.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="alice"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    finally:
        await kill(first)
        await kill(second)
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
    first = await spawn(temporal_address, task_queue, config)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        deadline = time.monotonic() + 30
        while not ran.exists():  # the commit is made, its hook still running
            assert time.monotonic() < deadline, "the commit never ran"
            await asyncio.sleep(0.05)
        await kill(first)
        second = await spawn(temporal_address, task_queue, config)
        outcome = await asyncio.wait_for(handle.result(), 60)  # the lost attempt times out (1.5 s + 10 s)
    finally:
        await kill(first)
        await kill(second)
    assert outcome.success, outcome.error
    assert "not idempotent and may have run, so it is not run again" in outcome.output
    assert ran.read_text() == "ran\n"  # the command ran once
    assert int(git(repo, "rev-list", "--count", "HEAD")) == before + 1
    (commit,) = [c for c in outcome.tool_calls if c.tool == "cli:git/commit"]
    assert commit.status == "error" and commit.error.type == "TimeoutError" and commit.attempts == 2
