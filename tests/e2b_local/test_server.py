"""Conformance of the local E2B server with what the unmodified SDK expects.

The cases are the research note's list (``../shared/research/e2b-wire.md`` section 7):
lifecycle, files, commands and their streams, pause and kill, isolation. If an SDK
upgrade changes the wire, these fail before the runtime's tests do.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from e2b import (
    CommandExitException,
    FileNotFoundException,
    SandboxNotFoundException,
    SandboxNotRunningException,
    SandboxQuery,
    SandboxState,
)
from e2b_code_interpreter import E2B

from tests.e2b_local import LocalE2BServer

ECHO = "exec /usr/bin/python3 -u -c 'import sys\nfor l in sys.stdin: print(l.strip().upper(), flush=True)'"


@pytest.fixture(scope="module")
def server() -> Iterator[LocalE2BServer]:
    with LocalE2BServer() as srv:
        yield srv


@pytest.fixture
def Sandbox(server: LocalE2BServer) -> Any:
    return E2B(api_key="any-key", api_url=server.url, sandbox_url=server.url).AsyncSandbox


@pytest.fixture
async def sbx(Sandbox: Any) -> AsyncIterator[Any]:
    sandbox = await Sandbox.create(timeout=120, metadata={"suite": "server"}, envs={"FROM_CREATE": "1"})
    yield sandbox
    await Sandbox.kill(sandbox.sandbox_id)


async def until(predicate: Any, timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if await predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_create_info_and_list(Sandbox: Any, sbx: Any) -> None:
    info = await sbx.get_info()
    assert info.state == SandboxState.RUNNING and info.metadata == {"suite": "server"}
    assert len(sbx.sandbox_id) == 20 and sbx.sandbox_id.isalnum()
    listed = await Sandbox.list(query=SandboxQuery(metadata={"suite": "server"})).next_items()
    assert [i.sandbox_id for i in listed] == [sbx.sandbox_id]
    assert await Sandbox.list(query=SandboxQuery(metadata={"suite": "other"})).next_items() == []
    assert await sbx.is_running()


async def test_a_missing_api_key_is_refused(server: LocalE2BServer) -> None:
    from e2b import AuthenticationException

    client = E2B(api_key="", api_url=server.url, sandbox_url=server.url)
    with pytest.raises(AuthenticationException):
        await client.AsyncSandbox.create()


async def test_files(sbx: Any) -> None:
    await sbx.files.write("notes/a.txt", "hello")  # multipart
    await sbx.files.write("~/notes/b.bin", b"\x00\x01")
    import io

    await sbx.files.write("/tmp/c.txt", io.BytesIO(b"stream"))  # octet-stream
    assert await sbx.files.read("/home/user/notes/a.txt") == "hello"
    assert bytes(await sbx.files.read("notes/b.bin", format="bytes")) == b"\x00\x01"
    assert await sbx.files.read("/tmp/c.txt") == "stream"
    with pytest.raises(FileNotFoundException):
        await sbx.files.read("missing.txt")
    result = await sbx.commands.run("cat notes/a.txt /tmp/c.txt; echo $FROM_CREATE")
    assert result.stdout == "hellostream1\n"


async def test_exit_codes_and_output(sbx: Any) -> None:
    with pytest.raises(CommandExitException) as info:
        await sbx.commands.run("echo hi; echo oops >&2; exit 3")
    assert (info.value.exit_code, info.value.stdout, info.value.stderr) == (3, "hi\n", "oops\n")
    assert info.value.error == "exit status 3"


async def test_the_jail(sbx: Any) -> None:
    result = await sbx.commands.run("id -un; id -u; pwd; echo $HOME; test -e /work && echo host || echo jailed")
    assert result.stdout.split() == ["user", "1000", "/home/user", "/home/user", "jailed"]
    root = await sbx.commands.run("id -u", user="root")
    assert root.stdout.strip() == "0"  # root of the sandbox's user namespace, not of the host


async def test_background_stdin_list_and_kill(sbx: Any) -> None:
    out: list[str] = []
    handle = await sbx.commands.run(ECHO, background=True, stdin=True, timeout=0, on_stdout=out.append)
    await handle.send_stdin("abc\n")
    await until(lambda: _true("".join(out) == "ABC\n"))
    assert handle.pid in [p.pid for p in await sbx.commands.list()]
    assert await sbx.commands.kill(handle.pid)
    with pytest.raises(CommandExitException) as info:
        await handle.wait()
    assert (info.value.exit_code, info.value.error) == (-1, "signal: killed")
    assert not await sbx.commands.kill(handle.pid)


async def _true(value: bool) -> bool:
    return value


async def test_close_stdin_ends_the_reader(sbx: Any) -> None:
    handle = await sbx.commands.run("cat", background=True, stdin=True, timeout=0)
    await handle.send_stdin("x")
    await sbx.commands.close_stdin(handle.pid)
    result = await handle.wait()
    assert result.exit_code == 0 and result.stdout == "x"


async def test_output_while_detached_is_lost_and_connect_starts_fresh(sbx: Any) -> None:
    handle = await sbx.commands.run(ECHO, background=True, stdin=True, timeout=0)
    await handle.disconnect()
    await sbx.commands.send_stdin(handle.pid, "lost\n")  # nobody attached: discarded
    await asyncio.sleep(0.3)
    out: list[str] = []
    again = await sbx.commands.connect(handle.pid, timeout=0, on_stdout=out.append)
    await again.send_stdin("seen\n")
    await until(lambda: _true("".join(out) == "SEEN\n"))
    await sbx.commands.close_stdin(handle.pid)
    await again.wait()
    # The exit is retained: a late connect still learns it.
    late = await sbx.commands.connect(handle.pid, timeout=0)
    assert (await late.wait()).exit_code == 0


async def test_pause_and_resume(Sandbox: Any, sbx: Any) -> None:
    out: list[str] = []
    handle = await sbx.commands.run(ECHO, background=True, stdin=True, timeout=0, on_stdout=out.append)
    waiting = asyncio.create_task(handle.wait())
    assert await sbx.pause()
    with pytest.raises(SandboxNotRunningException):
        await waiting  # the stream dropped with the pause
    assert not await sbx.is_running()
    assert (await sbx.get_info()).state == SandboxState.PAUSED
    assert not await sbx.pause()  # already paused
    with pytest.raises(SandboxNotRunningException):
        await sbx.commands.run("true")
    paused = await Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    assert sbx.sandbox_id in [i.sandbox_id for i in paused]

    resumed = await Sandbox.connect(sbx.sandbox_id)
    assert (await resumed.get_info()).state == SandboxState.RUNNING
    assert handle.pid in [p.pid for p in await resumed.commands.list()]  # the process survived
    out.clear()
    again = await resumed.commands.connect(handle.pid, timeout=0, on_stdout=out.append)
    await again.send_stdin("back\n")
    await until(lambda: _true("".join(out) == "BACK\n"))
    await again.kill()


async def test_kill(Sandbox: Any) -> None:
    sandbox = await Sandbox.create(timeout=60)
    running = asyncio.create_task(sandbox.commands.run("sleep 30"))
    await asyncio.sleep(0.3)
    assert await Sandbox.kill(sandbox.sandbox_id)
    with pytest.raises(SandboxNotRunningException, match="killed or reached its end of life"):
        await running
    assert not await Sandbox.kill(sandbox.sandbox_id)
    with pytest.raises(SandboxNotFoundException):
        await Sandbox.connect(sandbox.sandbox_id)


async def test_sandboxes_are_isolated(Sandbox: Any) -> None:
    a, b = await Sandbox.create(timeout=60), await Sandbox.create(timeout=60)
    try:
        await a.files.write("mine.txt", "a")
        with pytest.raises(FileNotFoundException):
            await b.files.read("mine.txt")
        assert (await b.commands.run("find /tmp /home/user -mindepth 1 | wc -l")).stdout.strip() == "0"
    finally:
        await a.kill()
        await b.kill()


async def test_command_timeout_kills_server_side(sbx: Any) -> None:
    with pytest.raises(CommandExitException) as info:
        await sbx.commands.run("sleep 30", timeout=1)
    assert info.value.error == "signal: killed"


async def test_expiry_kills_or_pauses(Sandbox: Any) -> None:
    killed = await Sandbox.create(timeout=1)
    paused = await Sandbox.create(timeout=1, lifecycle={"on_timeout": "pause"})
    await until(lambda: _gone(Sandbox, killed.sandbox_id))
    # Created a moment later (longer under load): its own second may not be over yet.
    await until(lambda: _state_is(paused, SandboxState.PAUSED))
    await paused.set_timeout(60)
    await Sandbox.kill(paused.sandbox_id)


async def _state_is(sandbox: Any, state: Any) -> bool:
    return (await sandbox.get_info()).state == state


async def _gone(Sandbox: Any, sandbox_id: str) -> bool:
    try:
        await Sandbox.get_info(sandbox_id)
    except SandboxNotFoundException:
        return True
    return False
