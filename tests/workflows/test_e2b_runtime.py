"""``runtime="e2b"`` on Temporal, against the local E2B-compatible server (tests/e2b_local)
driven by the unmodified e2b SDK: the checkpoint is the sandbox's session, a run parked on
an approval holds a paused sandbox, any worker continues it by id, a sandbox lost while
parked is rebuilt by journal replay, and nothing is left running afterwards."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.cli.runner import base_env, codemode
from tests.e2b_local import LocalE2BServer

from .conftest import TOOLS_MODULE, read_events
from .test_approval import wait_for_state
from .test_crash import spawn_worker

CODE = "print('started')\na = slow_step(1, 0)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"


@pytest.fixture(scope="module")
def e2b_server() -> Iterator[LocalE2BServer]:
    with LocalE2BServer() as server:
        yield server


@pytest.fixture
def e2b_env(e2b_server: LocalE2BServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The SDK's three variables, for this process and the workers it spawns."""
    for key, value in e2b_server.env.items():
        monkeypatch.setenv(key, value)
    return e2b_server.env


async def sandboxes(server: LocalE2BServer) -> list[Any]:
    from e2b_code_interpreter import E2B

    client = E2B(api_key="local-test-key", api_url=server.url, sandbox_url=server.url)
    return await client.AsyncSandbox.list().next_items()


@pytest.fixture
async def no_sandbox_left(e2b_server: LocalE2BServer) -> AsyncIterator[None]:
    yield
    for _ in range(50):  # the release step kills the sandbox as the execution ends
        left = await sandboxes(e2b_server)
        if not left:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"sandboxes left running: {[(s.sandbox_id, s.state) for s in left]}")


async def test_parked_run_pauses_its_sandbox_and_another_worker_continues_it(
    client, temporal_address, task_queue, events_file, e2b_env, e2b_server, no_sandbox_left
) -> None:
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="e2b"), task_queue=task_queue)
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        (parked,) = await sandboxes(e2b_server)
        assert parked.state.value == "paused"  # waiting for a person costs no compute
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    assert outcome.stdout == "started\nafter\n"  # the same process went on: nothing printed twice
    audit = await fetch_audit(client, handle.id)
    ways = [(s.name, s.via) for s in audit.steps if s.name != "sandbox_release"]
    # started on the first worker, went on there (its kept handle), then after the approval
    # the second worker reconnected to the same sandbox by id: no replay anywhere.
    assert ways == [("sandbox_start", "started"), ("sandbox_resume", "live"), ("sandbox_resume", "restored")], ways
    lines = display.audit_lines(audit)
    assert any("restored from its checkpoint" in ln for ln in lines)
    assert any("paused the sandbox while the run waits" in ln for ln in lines)
    assert any("sandbox_release: released the sandbox" in ln for ln in lines)
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # each tool ran once


async def test_sandbox_lost_while_parked_is_rebuilt_by_replay(
    client, task_queue, events_file, e2b_env, e2b_server, no_sandbox_left
) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="e2b"), task_queue=task_queue)
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        from e2b_code_interpreter import E2B

        e2b = E2B(api_key="local-test-key", api_url=e2b_server.url, sandbox_url=e2b_server.url)
        (parked,) = await sandboxes(e2b_server)
        assert await e2b.AsyncSandbox.kill(parked.sandbox_id)  # expired, reaped, killed by someone
        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    assert outcome.stdout == "started\nafter\n"  # replayed prints are not shown twice
    lines = display.audit_lines(await fetch_audit(client, handle.id))
    assert any("replayed the journal because" in ln for ln in lines), lines
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # the journal answered the replay
    usage = outcome.usage["e2b"]
    assert (usage.sandboxes_created, usage.replays) == (2, 1), usage  # the lost one, and the replay's


async def test_cli_runs_code_on_e2b(temporal_address, e2b_env, e2b_server, no_sandbox_left, tmp_path) -> None:
    env = base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"cli-e2b-{uuid.uuid4().hex[:6]}",
        CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"],
        **e2b_env,
    )
    result = await codemode("run", "examples/trip.py", "--tools", "examples.tools", "--runtime", "e2b", env=env)
    assert result.rc == 0, result
    assert "best city: Tokyo" in result.out
    assert "✓ completed" in result.err
