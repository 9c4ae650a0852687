"""A parked run holds nothing that costs, on every provider (their local servers, or podman).

* Modal cannot pause a sandbox and keep its processes: a run parked past a short grace
  period (``CODEMODE_PARK_RELEASE_AFTER``) has no running sandbox; approved, it replays its
  journal in a fresh sandbox and ends with the result of a run approved at once, each tool
  run once, and the history says why it replayed. Its usage counts no running seconds for
  the time it waited released.
* E2B and Docker pause the sandbox, Blaxel's goes to standby: the history says so (never
  "paused" for a sandbox that kept running), the usage counts the wait as paused, not running.
(A paused sandbox deleted behind our back is rebuilt by replay: ``test_e2b_runtime.py`` and
``test_remote_runtimes.py``.)"""

from __future__ import annotations

import asyncio
import collections
import os
from collections.abc import AsyncIterator

import pytest
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.cli.runner import base_env, codemode

from .conftest import TOOLS_MODULE, read_events
from .sandbox_providers import Provider, provider_fixture, provider_server_fixture  # noqa: F401 (fixtures)
from .test_approval import wait_for_state
from .test_replay import HISTORIES

CODE = "print('started')\na = slow_step(1, 0)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"
#: Seconds the test lets a parked run wait after its sandbox was released or paused: the
#: usage may not count them as running.
WAIT = 2.0


async def replays(client, handle, name: str) -> None:
    """The run's history replays; with CODEMODE_RECORD_PARK_HISTORIES set it is committed
    beside the others (``histories/park-*.json``, replayed by ``test_replay.py``)."""
    history = await handle.fetch_history()
    if os.environ.get("CODEMODE_RECORD_PARK_HISTORIES"):
        (HISTORIES / f"park-{name}.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(history)


async def history_says(client, execution_id: str, text: str, timeout: float = 60.0) -> list[str]:
    for _ in range(int(timeout / 0.1)):
        lines = display.audit_lines(await fetch_audit(client, execution_id))
        if any(text in ln for ln in lines):
            return lines
        await asyncio.sleep(0.1)
    raise AssertionError(f"the history never says {text!r}: {lines}")


@pytest.fixture
async def worker(client, task_queue, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[CodeModeWorker]:
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", "1s")  # read by each park step
    w = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue)
    async with w.running():
        yield w


@pytest.mark.parametrize("provider_server", ["modal"], indirect=True)
async def test_modal_releases_a_parked_sandbox_and_replays_on_approval(
    provider: Provider, client, temporal_address, task_queue, worker, events_file, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="modal"), task_queue=task_queue)
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    await history_says(client, handle.id, "released the parked sandbox after 1s")
    assert await provider.of(handle.id) == []  # nothing runs while it waits
    await asyncio.sleep(WAIT)
    await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
    outcome = await asyncio.wait_for(handle.result(), 120)

    lines = display.audit_lines(await fetch_audit(client, handle.id))
    assert any("sandbox_park: the sandbox keeps running while the run waits (modal cannot pause" in ln for ln in lines)
    assert not any("paused the sandbox" in ln for ln in lines), lines
    assert any("replayed the journal because its sandbox was released after 1s parked" in ln for ln in lines), lines
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # the journal answered the replay

    usage = outcome.usage["modal"]
    assert (usage.sandboxes_created, usage.replays, usage.released_while_parked) == (2, 1, 1), usage
    assert usage.paused_seconds == 0
    assert 0 < usage.running_seconds <= outcome.duration_ms / 1000 - WAIT, (usage, outcome.duration_ms)
    assert any(ln.startswith("usage: modal") for ln in display.usage_lines(outcome))
    await replays(client, handle, "modal-released")
    # What a person sees: `codemode result` and `codemode history` show the usage.
    env = base_env(TEMPORAL_ADDRESS=temporal_address, CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"])
    result = await codemode("result", handle.id, env=env)
    assert result.rc == 0 and "usage: modal" in result.err and "1 released while parked" in result.err, result
    history = await codemode("history", handle.id, env=env)
    assert history.rc == 0 and "usage: modal" in history.out, history

    # The same code approved at once (well within the grace period): the same result, and
    # its one sandbox went on without a replay.
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", "1h")
    quick = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="modal"), task_queue=task_queue)
    await wait_for_state(quick, "awaiting_approval", timeout=60)
    await quick.signal("approve", ApproveSignal(call_id="2", by="ana"))
    unparked = await asyncio.wait_for(quick.result(), 120)
    assert (outcome.output, outcome.stdout) == (unparked.output, unparked.stdout) == ([10, "bob"], "started\nafter\n")
    assert (unparked.usage["modal"].sandboxes_created, unparked.usage["modal"].replays) == (1, 0)


@pytest.mark.parametrize("provider_server", ["docker", "e2b", "blaxel"], indirect=True)
async def test_a_paused_sandbox_counts_its_wait_as_paused(
    provider: Provider, client, task_queue, worker, events_file
) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code=CODE, runtime=provider.name), task_queue=task_queue
    )
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    said = {"blaxel": "the sandbox goes to standby while the run waits"}.get(
        provider.name, "paused the sandbox while the run waits"
    )
    lines = await history_says(client, handle.id, f"sandbox_park: {said}")
    assert not any("keeps running" in ln for ln in lines), lines
    await asyncio.sleep(WAIT)
    await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.output == [10, "bob"]
    usage = outcome.usage[provider.name]
    assert (usage.sandboxes_created, usage.replays, usage.released_while_parked) == (1, 0, 0), usage
    assert usage.paused_seconds >= WAIT, usage
    assert usage.running_seconds <= outcome.duration_ms / 1000 - WAIT, (usage, outcome.duration_ms)
    await replays(client, handle, f"{provider.name}-paused")


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_a_run_that_holds_nothing_while_parked_counts_no_running_seconds_for_the_wait(
    runtime: str, client, task_queue, worker, events_file
) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime=runtime), task_queue=task_queue)
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    await asyncio.sleep(WAIT)
    await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.output == [10, "bob"]
    usage = outcome.usage[runtime]
    assert usage.paused_seconds == 0 and usage.released_while_parked == 0, usage
    assert 0 < usage.running_seconds <= outcome.duration_ms / 1000 - WAIT, (usage, outcome.duration_ms)
