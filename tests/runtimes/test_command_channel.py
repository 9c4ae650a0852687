"""``CommandChannel``: the runner's protocol over a provider's command API, fed as the SDK
delivers it (decoded text chunks cut anywhere, stdout and stderr with no order between them)."""

from __future__ import annotations

import asyncio
import json

import pytest

from codemode.runtimes import SandboxError
from codemode.runtimes.execution import CallOutcome
from codemode.runtimes.transports import MessageTooLarge
from codemode.runtimes.transports import command as command_module
from codemode.runtimes.transports.command import CommandChannel
from codemode.runtimes.transports.protocol import CallMessage, DoneMessage


def call_line(call_id: str, mark: int | None = None) -> str:
    msg = {"type": "call", "call_id": call_id, "function_name": "f", "args": [call_id], "kwargs": {}}
    if mark is not None:
        msg["mark"] = mark
    return json.dumps(msg) + "\n"


def cut(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


async def test_lines_cut_anywhere_become_messages() -> None:
    output: list[str] = []
    channel = CommandChannel(on_output=output.append)
    stream = call_line("1") + "\n" + call_line("2") + json.dumps({"type": "done", "output": [1, 2]}) + "\n"
    for piece in cut(stream, 7):
        channel.feed_stdout(piece)
    first, second, done = [await channel.receive() for _ in range(3)]
    assert isinstance(first, CallMessage) and first.call_id == "1"
    assert isinstance(second, CallMessage) and second.call_id == "2"
    assert isinstance(done, DoneMessage) and done.output == [1, 2]
    channel.sandbox_exited()
    assert await channel.receive() is None
    assert await channel.receive() is None  # stays at the end


async def test_a_message_waits_for_the_output_before_it() -> None:
    output: list[str] = []
    channel = CommandChannel(on_output=output.append)
    channel.feed_stdout(call_line("1", mark=1))  # the call overtook the output it follows
    receiving = asyncio.create_task(channel.receive())
    await asyncio.sleep(0.05)
    assert not receiving.done()
    for piece in cut("printed before\n\x1ecm:1\x1f", 3):  # the mark itself cut in pieces
        channel.feed_stderr(piece)
    message = await asyncio.wait_for(receiving, 1.0)
    assert isinstance(message, CallMessage)
    assert "".join(output) == "printed before\n"  # the mark is not output


async def test_output_that_only_looks_like_a_mark_is_kept() -> None:
    output: list[str] = []
    channel = CommandChannel(on_output=output.append)
    for text in ("a\x1eb", "\x1ecm:x\x1f", "\x1ecm:12", "\x1f tail\x1e", "c\n"):
        channel.feed_stderr(text)
    # "\x1ecm:12" + "\x1f" is a mark cut in two (dropped); the rest is the code's output.
    assert "".join(output) == "a\x1eb\x1ecm:x\x1f tail\x1ec\n"


async def test_a_missing_mark_delays_only_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command_module, "MARK_WAIT_SECONDS", 0.05)
    channel = CommandChannel(on_output=lambda text: None)
    channel.feed_stdout(call_line("1", mark=1) + call_line("2", mark=2))
    assert isinstance(await asyncio.wait_for(channel.receive(), 5.0), CallMessage)
    monkeypatch.setattr(command_module, "MARK_WAIT_SECONDS", 3600.0)
    # The code's output went elsewhere: the next message is not held for its mark.
    assert isinstance(await asyncio.wait_for(channel.receive(), 5.0), CallMessage)


async def test_an_endless_line_is_too_large() -> None:
    channel = CommandChannel(on_output=lambda text: None, max_message_bytes=100)
    for _ in range(5):
        channel.feed_stdout("x" * 30)
    with pytest.raises(MessageTooLarge):
        await channel.receive()


async def test_answers_go_out_whole_on_a_fresh_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(command_module, "SEND_CHUNK_BYTES", 16)
    sent: list[bytes] = []

    async def send(data: bytes) -> None:
        sent.append(data)
        await asyncio.sleep(0)  # let another answer try to interleave

    channel = CommandChannel(on_output=lambda text: None)
    channel.bind(send)
    await asyncio.gather(
        channel.send_answer("1", CallOutcome.result("a" * 40)),
        channel.send_answer("2", CallOutcome.error("ValueError", "b" * 40)),
    )
    lines = [line for line in b"".join(sent).split(b"\n") if line]
    assert [json.loads(line)["call_id"] for line in lines] == ["1", "2"]
    assert b"".join(sent).startswith(b"\n")


async def test_a_failed_send_is_a_sandbox_error() -> None:
    async def send(data: bytes) -> None:
        raise ConnectionError("gone")

    channel = CommandChannel(on_output=lambda text: None)
    channel.bind(send)
    with pytest.raises(SandboxError, match="could not write"):
        await channel.send_answer("1", CallOutcome.result(1))


async def test_a_login_shell_talking_before_the_runner_is_output() -> None:
    output: list[str] = []
    channel = CommandChannel(on_output=output.append)
    channel.feed_stdout("Welcome to the sandbox!\n" + call_line("1") + "not json\n")
    assert isinstance(await channel.receive(), CallMessage)
    assert output == ["Welcome to the sandbox!\n"]
    with pytest.raises(SandboxError, match="malformed"):  # after the first message: an error
        await channel.receive()
