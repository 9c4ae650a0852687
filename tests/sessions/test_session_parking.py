"""A session's cell parked on a person's approval holds no running sandbox on Modal (which
cannot pause a sandbox and keep its processes), on the local Modal server: past the park
grace period (``CODEMODE_PARK_RELEASE_AFTER``) the session's sandbox is released; approved,
the cell rebuilds the session in a fresh sandbox (the earlier cells replayed from their
stored tool results) and replays its own journal, so it ends with the result it would have
had, each tool run once, and the next cell still sees what the earlier ones left.

With CODEMODE_RECORD_PARK_HISTORIES set, the parked cell's history (and the session's) are
written under ``histories/`` (``park-modal-*.json``, replayed by ``test_session_replay.py``)."""

from __future__ import annotations

import asyncio
import collections
import os

import pytest
from temporalio.worker import Replayer

from codemode.client import display
from codemode.client.histories.audit import fetch_audit
from codemode.client.sessions import close_session, describe_session, run_cell, submit_cell
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal
from codemode.workflows.session_workflow import CodeSessionWorkflow
from tests.workflows.conftest import read_events
from tests.workflows.sandbox_providers import Provider, provider_fixture, provider_server_fixture  # noqa: F401
from tests.workflows.test_approval import wait_for_state
from tests.workflows.test_parking import (
    history_says,
    worker,  # noqa: F401 (the fixture: a worker whose Modal park releases after 1 s)
)

from .test_session_replay import HISTORIES

PARKED = (
    "print('started')\na = slow_step(2, 0)\nr = transfer('bob', a)\nprint('after')\ncounter += a\n[a, r['to'], counter]"
)


@pytest.mark.parametrize("provider_server", ["modal"], indirect=True)
async def test_a_parked_modal_cell_releases_its_session_sandbox_and_replays_on_approval(
    provider: Provider, client, task_queue, worker, events_file, session_name, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def cell(code: str):
        return await submit_cell(client, session_name, code, runtime="modal", task_queue=task_queue)

    first = await (await cell("counter = slow_step(1, 0)\ncounter")).result()
    assert first.success and first.output == 10, first.error
    parked = await cell(PARKED)
    handle = await parked.started()
    await wait_for_state(handle, "awaiting_approval", timeout=60)
    await history_says(client, handle.id, "released the parked sandbox after 1s")
    assert await provider.sandboxes() == {}  # nothing runs while the cell waits
    await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
    outcome = await asyncio.wait_for(parked.result(), 120)
    assert outcome.success, outcome.error
    assert (outcome.output, outcome.stdout) == ([20, "bob", 30], "started\nafter\n")

    lines = display.audit_lines(await fetch_audit(client, handle.id))
    assert any("replayed the journal because its sandbox was released after 1s parked" in ln for ln in lines), lines
    usage = outcome.usage["modal"]
    assert (usage.replays, usage.released_while_parked) == (1, 1), usage
    # The next cell sees the session as the approved cell left it (in the rebuilt sandbox).
    after = await run_cell(client, session_name, "[counter, a, r['to']]", runtime="modal", task_queue=task_queue)
    assert after.success and after.output == [30, 20, "bob"], after.error
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 2, "transfer": 1}  # the stored results answered every replay

    # The same cells approved at once (well within the grace period): the same result, and
    # the session's sandbox went on without a replay.
    monkeypatch.setenv("CODEMODE_PARK_RELEASE_AFTER_MODAL", "1h")
    quick_name = f"{session_name}-q"
    await run_cell(client, quick_name, "counter = slow_step(1, 0)\ncounter", runtime="modal", task_queue=task_queue)
    quick = await submit_cell(client, quick_name, PARKED, runtime="modal", task_queue=task_queue)
    quick_handle = await quick.started()
    await wait_for_state(quick_handle, "awaiting_approval", timeout=60)
    await quick_handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
    unparked = await asyncio.wait_for(quick.result(), 120)
    assert (unparked.output, unparked.stdout) == (outcome.output, outcome.stdout)
    assert unparked.usage["modal"].replays == 0, unparked.usage
    await close_session(client, quick_name)

    await close_session(client, session_name)
    histories = {
        "park-modal-cell": await handle.fetch_history(),
        "park-modal-session": await client.get_workflow_handle(f"session:{session_name}").fetch_history(),
    }
    if os.environ.get("CODEMODE_RECORD_PARK_HISTORIES"):
        for name, history in histories.items():
            (HISTORIES / f"{name}.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow, CodeSessionWorkflow], data_converter=client.data_converter)
    for history in histories.values():
        await replayer.replay_workflow(history)


@pytest.mark.parametrize("provider_server", ["modal"], indirect=True)
async def test_an_idle_modal_session_releases_its_sandbox_and_its_next_cell_replays(
    provider: Provider, client, task_queue, worker, events_file, session_name
) -> None:
    """Idle between cells past the grace period, the session's sandbox is released (not
    kept up to the provider's timeout or the session's idle timeout); its next cell rebuilds
    the session in a fresh sandbox from the earlier cells' stored results."""
    first = await run_cell(client, session_name, "x = slow_step(3, 0)\nx", runtime="modal", task_queue=task_queue)
    assert first.success and first.output == 30, first.error
    for _ in range(600):
        status = await describe_session(client, session_name)
        if status.kept_as == "replay":
            break
        await asyncio.sleep(0.1)
    assert status.kept_as == "replay", status
    assert await provider.sandboxes() == {}  # nothing runs while the session waits for a cell
    assert status.variables.keys() == {"x"}
    second = await submit_cell(client, session_name, "x + 1", runtime="modal", task_queue=task_queue)
    outcome = await second.result()
    assert outcome.success and outcome.output == 31, outcome.error
    lines = display.audit_lines(await fetch_audit(client, second.execution_id))
    assert any("its sandbox was released after 1s idle (modal cannot pause" in ln for ln in lines), lines
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1}  # its stored result answered the replay

    await close_session(client, session_name)
    history = await client.get_workflow_handle(f"session:{session_name}").fetch_history()
    if os.environ.get("CODEMODE_RECORD_PARK_HISTORIES"):
        (HISTORIES / "park-modal-idle-session.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow, CodeSessionWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(history)
