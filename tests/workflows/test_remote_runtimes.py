"""``runtime="blaxel"`` and ``runtime="modal"`` on Temporal, each against its local compatible
server (tests/blaxel_local, tests/modal_local) driven by the unmodified SDK: the programs the
python runtime runs; a run parked on an approval whose worker is SIGKILLed goes on in the
same sandbox on a second worker; a sandbox deleted while parked is rebuilt by journal
replay and the audit says why; nothing is left afterwards; and a worker without the
provider's credentials ends the run at once with an error naming them."""

from __future__ import annotations

import asyncio
import collections
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.blaxel_local import LocalBlaxelServer
from tests.e2b_local import LocalE2BServer
from tests.modal_local import LocalModalServer

from .conftest import TOOLS_MODULE, read_events
from .test_approval import wait_for_state
from .test_crash import spawn_worker
from .test_python_runtime import CODE as PYTHON_CODE

CODE = "print('started')\na = slow_step(1, 0)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"
PROVIDERS = ["blaxel", "modal"]


@dataclass
class Remote:
    """A provider's local server, and how a test sees and deletes its sandboxes."""

    name: str
    server: LocalE2BServer
    sandboxes: Callable[[], Awaitable[list[str]]]
    delete: Callable[[str], Awaitable[Any]]
    #: The variables naming the provider's credentials (absent: the runtime refuses).
    credentials: tuple[str, ...]


def _blaxel(server: LocalE2BServer) -> Remote:
    from tests.runtimes.conftest import blaxel_sandboxes, delete_blaxel_sandbox

    return Remote(
        "blaxel",
        server,
        lambda: _names(blaxel_sandboxes(server)),  # type: ignore[arg-type]
        lambda name: delete_blaxel_sandbox(name, server),  # type: ignore[arg-type]
        ("BL_API_KEY", "BL_WORKSPACE"),
    )


async def _names(listing: Awaitable[dict[str, str]]) -> list[str]:
    return list(await listing)


def _modal(server: LocalE2BServer) -> Remote:
    import modal

    async def sandboxes() -> list[str]:
        client = await modal.Client.from_credentials.aio("ak-local", "as-local")
        app = await modal.App.lookup.aio("codemode", create_if_missing=True, client=client)
        return [s.object_id async for s in modal.Sandbox.list.aio(app_id=app.app_id, client=client)]

    async def delete(sandbox_id: str) -> None:
        client = await modal.Client.from_credentials.aio("ak-local", "as-local")
        await (await modal.Sandbox.from_id.aio(sandbox_id, client=client)).terminate.aio()

    return Remote("modal", server, sandboxes, delete, ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"))


@pytest.fixture(scope="module", params=PROVIDERS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, LocalE2BServer]]:
    kind = LocalBlaxelServer if request.param == "blaxel" else LocalModalServer
    with kind() as running:
        yield request.param, running


@pytest.fixture
async def remote(server: tuple[str, LocalE2BServer], monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Remote]:
    """The provider's variables for this process and the workers it spawns; afterwards no
    sandbox may be left running."""
    name, running = server
    for key, value in running.env.items():
        monkeypatch.setenv(key, value)
    if name == "blaxel":
        monkeypatch.setenv("BL_REGION", "local")
    remote = _blaxel(running) if name == "blaxel" else _modal(running)
    yield remote
    for _ in range(50):  # the release step deletes the sandbox as the execution ends
        left = await remote.sandboxes()
        if not left:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{name} sandboxes left: {left}")


async def test_the_python_runtimes_program_runs(remote: Remote, client, task_queue, worker, events_file) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code=PYTHON_CODE, runtime=remote.name), task_queue=task_queue
    )
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == (10 + 100 + 101 + 102) / 4
    assert outcome.stdout == "caught unknown city: Atlantis\n"
    assert outcome.runtime == remote.name
    assert [c.status for c in outcome.tool_calls] == ["ok"] * 4 + ["error"]
    bad = await start_execution(
        client, CodeExecutionRequest(code="x = 1\nx / 0", runtime=remote.name), task_queue=task_queue
    )
    failed = await asyncio.wait_for(bad.result(), 120)
    assert not failed.success and failed.error.type == "ZeroDivisionError" and failed.error.line == 2


async def test_a_parked_run_goes_on_in_the_same_sandbox_after_its_worker_is_killed(
    remote: Remote, client, temporal_address, task_queue, events_file
) -> None:
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(
            client, CodeExecutionRequest(code=CODE, runtime=remote.name), task_queue=task_queue
        )
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        (parked,) = await remote.sandboxes()
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
    # the second worker reconnected to the same sandbox by its handle: no replay anywhere.
    assert ways == [("sandbox_start", "started"), ("sandbox_resume", "live"), ("sandbox_resume", "restored")], ways
    assert any("restored from its checkpoint" in ln for ln in display.audit_lines(audit))
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # each tool ran once
    assert parked not in await remote.sandboxes()


async def test_a_sandbox_deleted_while_parked_is_rebuilt_by_replay(
    remote: Remote, client, task_queue, events_file
) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(
            client, CodeExecutionRequest(code=CODE, runtime=remote.name), task_queue=task_queue
        )
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        (parked,) = await remote.sandboxes()
        await remote.delete(parked)  # expired, reaped, deleted by someone
        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    assert outcome.stdout == "started\nafter\n"  # replayed prints are not shown twice
    lines = display.audit_lines(await fetch_audit(client, handle.id))
    why = [ln for ln in lines if "replayed the journal because" in ln]
    assert why and parked in why[0] and "is gone" in why[0], lines
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # the journal answered the replay
    usage = outcome.usage[remote.name]
    assert (usage.sandboxes_created, usage.replays) == (2, 1), usage  # the lost one, and the replay's


async def test_without_credentials_the_run_ends_at_once_with_an_error_naming_them(
    remote: Remote, client, task_queue, worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in remote.credentials:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no `bl login` / `modal token` profile either
    monkeypatch.setenv("MODAL_CONFIG_PATH", "/nonexistent/.modal.toml")
    handle = await start_execution(
        client, CodeExecutionRequest(code="1 + 1", runtime=remote.name), task_queue=task_queue
    )
    outcome = await asyncio.wait_for(handle.result(), 30)  # not stuck, not retried
    assert not outcome.success
    assert outcome.error.kind == "input"
    assert all(key in outcome.error.message for key in remote.credentials), outcome.error.message
