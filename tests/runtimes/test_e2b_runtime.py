"""E2BRuntime beyond the contract: the session as the checkpoint, pause and kill, settings.

Real parts throughout: the unmodified e2b SDK, the local E2B server (``tests/e2b_local``)
running each sandbox's processes in bubblewrap, our runner in it. A fresh ``E2BRuntime``
instance stands for another worker: it shares nothing with the first but the blob.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from e2b_code_interpreter import E2B

from codemode.runtimes import CodeExecution, ExecutionResult, FunctionCall, SandboxError, get_runtime
from codemode.runtimes.checkpoint import read_header
from codemode.runtimes.e2b import E2BRuntime, E2BSettingsError
from codemode.runtimes.journal_replay import JournalEntry, replay

from .conftest import e2b_runtime, e2b_sandboxes, local_e2b

HANG_GUARD_S = 60.0
T = TypeVar("T")


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, HANG_GUARD_S)


def get(i: int) -> int:
    """A tool."""
    raise NotImplementedError


TOOLS = {"get": get}

CODE = """
print("started")
a = get(1)
print("got", a)
b = get(2)
[a, b]
"""


def sdk() -> Any:
    server = local_e2b()
    return E2B(api_key="local-test-key", api_url=server.url, sandbox_url=server.url).AsyncSandbox


def sandbox_of(blob: bytes) -> tuple[str, int]:
    header = read_header(blob)
    assert header is not None and header["runtime"] == "e2b"
    return header["meta"]["sandbox_id"], header["meta"]["pid"]


async def states() -> dict[str, str]:
    return {info.sandbox_id: info.state.value for info in await e2b_sandboxes()}


async def first_call(rt: E2BRuntime) -> tuple[CodeExecution, FunctionCall, bytes]:
    """Start CODE, run to its first call and checkpoint there."""
    execution = await guarded(rt.execute(CODE, functions=TOOLS))
    batch = await guarded(execution.next_batch())
    assert isinstance(batch, list) and [(c.function_name, c.args) for c in batch] == [("get", [1])]
    blob = execution.dump()
    assert blob is not None
    return execution, batch[0], blob


async def finish(execution: CodeExecution, first: FunctionCall) -> ExecutionResult:
    await execution.provide_result(100, call_id=first.call_id)
    batch = await guarded(execution.next_batch())
    assert isinstance(batch, list) and [c.args for c in batch] == [[2]]
    await execution.provide_result(200, call_id=batch[0].call_id)
    result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    return result


# -- the checkpoint is the session ---------------------------------------------------------


async def test_a_fresh_runtime_continues_the_same_sandbox_without_replay() -> None:
    worker_a = e2b_runtime()
    execution, call, blob = await first_call(worker_a)
    assert execution.stdout == "started\n"
    sandbox_id, _ = sandbox_of(blob)
    assert len(blob) < 2048  # a small blob: ids and a position, no heap
    await execution.close()  # the checkpoint is current: only detaches
    await worker_a.aclose()
    assert await states() == {sandbox_id: "running"}

    worker_b = e2b_runtime()  # another worker: nothing shared but the bytes
    restored = await guarded(worker_b.restore(blob))
    assert restored is not None
    assert [(c.call_id, c.function_name, c.args) for c in restored.pending_calls] == [(call.call_id, "get", [1])]
    result = await finish(restored, call)
    # The same process went on: "started" is not printed again (no replay) and the
    # answer arrived once.
    assert result.output == [100, 200]
    assert result.stdout == "got 100\n"
    assert result.tool_calls == 2
    await restored.close()
    await worker_b.aclose()
    assert await states() == {}  # the result kills the sandbox


async def test_a_kept_handle_goes_on_after_dump() -> None:
    """A worker that keeps the live handle after a step (its cache) uses it as is."""
    rt = e2b_runtime()
    execution, call, _ = await first_call(rt)
    result = await finish(execution, call)
    assert result.stdout == "started\ngot 100\n"
    await execution.close()
    await rt.aclose()


async def test_suspend_pauses_and_restore_resumes() -> None:
    rt = e2b_runtime()
    execution, call, blob = await first_call(rt)
    sandbox_id, _ = sandbox_of(blob)
    await execution.close()
    await guarded(rt.suspend(blob))
    assert await states() == {sandbox_id: "paused"}
    await guarded(rt.suspend(blob))  # already paused: no error
    paused = [i.sandbox_id for i in await sdk().list(query=_paused_query()).next_items()]
    assert paused == [sandbox_id]

    other = e2b_runtime()
    restored = await guarded(other.restore(blob))
    assert restored is not None
    assert await states() == {sandbox_id: "running"}
    result = await finish(restored, call)
    assert result.output == [100, 200] and result.stdout == "got 100\n"
    await other.aclose()
    await rt.aclose()


def _paused_query() -> Any:
    from e2b import SandboxQuery, SandboxState

    return SandboxQuery(state=[SandboxState.PAUSED], metadata={"codemode": "1"})


async def test_a_kept_handle_survives_a_suspend() -> None:
    """The worker that suspended the sandbox still holds the handle: its next use
    reconnects (resuming the sandbox) and re-attaches before answering."""
    rt = e2b_runtime()
    execution, call, blob = await first_call(rt)
    sandbox_id, _ = sandbox_of(blob)
    await rt.suspend(blob)
    assert await states() == {sandbox_id: "paused"}
    result = await finish(execution, call)
    assert result.output == [100, 200] and result.stdout == "started\ngot 100\n"
    await rt.aclose()


# -- gone or out of step: restore says None, the journal rebuilds the run ------------------


async def _kill_behind_our_back(sandbox_id: str, pid: int, what: str) -> None:
    if what == "sandbox":
        assert await sdk().kill(sandbox_id)
    else:
        sandbox = await sdk().connect(sandbox_id)
        assert await sandbox.commands.kill(pid)
        for _ in range(100):  # wait until envd reaped it
            if pid not in [p.pid for p in await sandbox.commands.list()]:
                break
            await asyncio.sleep(0.05)


@pytest.mark.parametrize("how", ["discard", "sandbox", "runner"])
async def test_restore_after_a_kill_is_none_and_replay_completes(how: str) -> None:
    rt = e2b_runtime()
    execution, call, blob = await first_call(rt)
    journal = [JournalEntry.returned(call, 100)]
    sandbox_id, pid = sandbox_of(blob)
    await execution.close()
    if how == "discard":
        await rt.discard(blob)
        await rt.discard(blob)  # idempotent
    else:
        await _kill_behind_our_back(sandbox_id, pid, how)

    other = e2b_runtime()
    assert await guarded(other.restore(blob)) is None
    assert sandbox_id not in await states()  # what was left of it is killed too

    fresh = await guarded(other.execute(CODE, functions=TOOLS))  # the caller's fallback
    event = await guarded(replay(fresh, journal))
    assert isinstance(event, list) and [c.args for c in event] == [[2]]
    await fresh.provide_result(200, call_id=event[0].call_id)
    result = await guarded(fresh.next_batch())
    assert isinstance(result, ExecutionResult)
    assert result.output == [100, 200]
    assert result.stdout == "started\ngot 100\n"  # replayed from the start
    await fresh.close()
    await other.aclose()
    await rt.aclose()


async def test_a_runner_that_moved_on_is_not_trusted() -> None:
    """Worker B restores and advances; the old checkpoint (an activity retry) no longer
    describes the runner: output emitted while nobody watched is lost."""
    worker_a = e2b_runtime()
    kept, call, blob = await first_call(worker_a)  # worker A keeps its handle (cache)

    worker_b = e2b_runtime()
    restored = await guarded(worker_b.restore(blob))
    assert restored is not None
    await restored.provide_result(100, call_id=call.call_id)
    batch = await guarded(restored.next_batch())
    assert isinstance(batch, list) and [c.args for c in batch] == [[2]]
    newer = restored.dump()
    assert newer is not None

    # A's kept handle saw B's traffic: it re-syncs, finds the runner ahead, and refuses.
    with pytest.raises(SandboxError, match="ahead of this checkpoint"):
        await kept.provide_result(100, call_id=call.call_id)
    await kept.close()  # must not kill the sandbox B is driving
    await worker_a.aclose()
    sandbox_id, _ = sandbox_of(blob)
    assert await states() == {sandbox_id: "running"}

    # A retry with the old checkpoint on a third worker: None (and the sandbox is killed).
    worker_c = e2b_runtime()
    assert await guarded(worker_c.restore(blob)) is None
    assert await states() == {}
    await restored.close()
    await worker_b.aclose()
    await worker_c.aclose()


async def test_close_after_advancing_past_the_checkpoint_kills() -> None:
    rt = e2b_runtime()
    execution, call, blob = await first_call(rt)
    await execution.provide_result(100, call_id=call.call_id)
    await guarded(execution.next_batch())
    await execution.close()  # the checkpoint is stale: nobody can use this sandbox any more
    assert await states() == {}
    assert await guarded(rt.restore(blob)) is None
    await rt.aclose()


async def test_a_foreign_or_damaged_checkpoint_is_refused() -> None:
    rt = e2b_runtime()
    execution, _, blob = await first_call(rt)
    assert await rt.restore(blob.replace(b'"e2b"', b'"xyz"', 1)) is None
    assert await rt.restore(b"garbage") is None
    await execution.close()
    await rt.discard(blob)
    await rt.aclose()


# -- output, credentials, settings ------------------------------------------------------------


async def test_output_before_a_call_is_there_when_the_call_arrives() -> None:
    """envd streams stdout and stderr separately; the runner's output marks keep the
    order: everything printed before a call is in stdout when the call is returned."""
    code = "for i in range(200):\n    print('line', i, 'x' * 500)\nget(1)\nprint('after')\nget(2)"
    rt = e2b_runtime()
    execution = await guarded(rt.execute(code, functions=TOOLS))
    async with execution:
        batch = await guarded(execution.next_batch())
        assert isinstance(batch, list)
        lines = execution.stdout.splitlines()
        assert len(lines) == 200 and lines[-1].startswith("line 199 ")
        await execution.provide_result(1, call_id=batch[0].call_id)
        batch = await guarded(execution.next_batch())
        assert isinstance(batch, list) and execution.stdout.endswith("after\n")
        assert "\x1e" not in execution.stdout  # the marks are stripped
        await execution.provide_result(2, call_id=batch[0].call_id)
        await guarded(execution.next_batch())
    await rt.aclose()


async def test_no_credential_or_host_address_enters_the_sandbox() -> None:
    server = local_e2b()
    code = """
import os
found = {k: v for k, v in os.environ.items()}
found["__cmdline__"] = open("/proc/self/cmdline", "rb").read().decode("utf-8", "replace")
found["__runner__"] = open(os.path.expanduser("~/.codemode/runner.zip"), "rb").read().decode("latin-1")  # stored: sources as is
found
"""
    rt = e2b_runtime(envs={"VISIBLE": "yes"})
    execution = await guarded(rt.execute(code, functions=TOOLS))
    async with execution:
        result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    seen = result.output
    assert seen["VISIBLE"] == "yes"  # the configured environment is there...
    blob = repr(seen)
    assert "local-test-key" not in blob  # ...but no credential
    assert server.url not in blob and server.url.split("//")[1] not in blob  # nor where the host is
    assert not any(k.startswith("E2B_") for k in seen)
    await rt.aclose()


def test_a_missing_api_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    with pytest.raises(E2BSettingsError, match="E2B_API_KEY") as info:
        E2BRuntime()
    assert isinstance(info.value, ValueError)  # the activity reports it in-band, as an input error
    with pytest.raises(ValueError, match="E2B_API_KEY"):
        get_runtime("e2b")


async def test_the_sdk_variables_select_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `codemode run --runtime e2b` does: get_runtime("e2b") with the three variables set."""
    for key, value in local_e2b().env.items():
        monkeypatch.setenv(key, value)
    rt = get_runtime("e2b")
    assert isinstance(rt, E2BRuntime) and rt.template == "code-interpreter-v1"
    execution = await guarded(rt.execute("import sys\nsys.version_info[0] * 10 + 2", functions=[]))
    async with execution:
        result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult) and result.output == 32
    await rt.aclose()


@pytest.mark.parametrize("internet", [False, True])
async def test_internet_access_setting(internet: bool) -> None:
    """Off by default: the sandbox has a network of its own with only a loopback."""
    code = "import socket\nsorted(name for _, name in socket.if_nameindex())"
    rt = e2b_runtime(internet_access=True) if internet else e2b_runtime()
    assert rt.capabilities.network is internet
    execution = await guarded(rt.execute(code, functions=[]))
    async with execution:
        result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult)
    if internet:
        assert len(result.output) > 1
    else:
        assert result.output == ["lo"]
    await rt.aclose()


def test_registry_names_e2b() -> None:
    from codemode.runtimes import RUNTIMES

    assert RUNTIMES["e2b"] == "codemode.runtimes.e2b:E2BRuntime"
    assert os.environ.get("E2B_DEBUG") is None  # debug mode would bypass the API entirely
