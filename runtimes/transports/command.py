"""``CommandTransport``: JSON lines over the stdin/stdout of a process a provider runs for us.

The provider-native channel of a cloud sandbox (E2B's ``commands`` API): the runner's
protocol goes out on the process's stdout and its answers come in on its stdin, through
the provider's own API. Nothing else is needed inside the sandbox: no listening socket,
no host address, no token.

Two differences from a local pipe (``stdio.py``), both handled here:

* **Output order.** The provider reads the process's stdout and stderr separately and
  delivers them on one stream with no order between them, so a call can arrive before
  the text the code printed just before it. The runner therefore writes an output mark
  (``\\x1ecm:N\\x1f\\n``) on its output before message N and the message carries
  ``"mark": N``; ``receive()`` holds message N until mark N has come through the output.
  Marks (and the newline after each) are stripped from the output.
* **Replayed output.** A provider whose log stream starts again from the beginning on
  every attach (Blaxel's ``stream_logs``) shows a re-attaching worker what earlier workers
  already handled: ``skip_through(N)`` drops the messages up to mark N and the output
  before it.
* **A shell in front.** The provider starts the command through a login shell, whose
  profile may print; lines before the runner's first message that are not JSON are the
  code's output, not a protocol error.
* **Sending fails loudly.** An answer goes out as an API request; if it cannot be
  delivered, ``send_answer`` raises ``SandboxError`` (the answer is lost, so waiting for
  the process would hang). The step fails and is retried from the checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import SandboxError
from ..execution import CallOutcome
from .base import CallbackChannel, CallbackTransport
from .protocol import MAX_MESSAGE_BYTES, MessageTooLarge, SandboxMessage, answer_payload, parse_message

#: How long a message waits for its output mark before it is handled anyway (after one
#: such wait, marks are not waited for again: the code moved its output elsewhere).
MARK_WAIT_SECONDS = 5.0
#: Answers go out in pieces of at most this many bytes (one API request each).
SEND_CHUNK_BYTES = 1 << 20
_MARK = re.compile(r"\x1ecm:(\d{1,18})\x1f\n?")
_MARK_PREFIX = "\x1ecm:"
_EOF = object()

SendFn = Callable[[bytes], Awaitable[None]]
OutputFn = Callable[[str], None]


class CommandChannel(CallbackChannel):
    """One execution's channel over a provider's command: feed it the command's stdout and
    stderr (``feed_stdout`` / ``feed_stderr``, the SDK's output callbacks) and give it a
    way to write the command's stdin (``bind``)."""

    uses_stdio = True

    def __init__(self, *, on_output: OutputFn, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.params = {"kind": "stdio"}
        self.binds = []
        self._on_output = on_output
        self._max = max_message_bytes
        self._send: SendFn | None = None
        self._send_lock = asyncio.Lock()  # one answer's pieces are never interleaved with another's
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._parts: list[str] = []  # the line being received
        self._size = 0
        self._stderr = ""
        self._mark = 0
        self._eat_newline = False  # a mark ended a chunk: its newline may open the next one
        #: Messages up to this mark (and the output before it) were handled already.
        self._skip = 0
        #: The mark of the last message ``receive()`` handed out.
        self.last_mark = 0
        self._mark_seen = asyncio.Event()
        self._marks_arrive = True
        self._started = False  # a valid message arrived (before it, non-JSON lines are shell noise)

    def bind(self, send: SendFn) -> None:
        self._send = send

    def reset(self) -> None:
        """Drop what arrived so far (before a re-attach to the same process)."""
        self._queue = asyncio.Queue()
        self._parts, self._size = [], 0
        self._stderr = ""
        self._eat_newline = False

    def skip_through(self, mark: int) -> None:
        """The stream replays from the start: drop the messages up to ``mark`` and the output
        written before it (they were handled by whoever was attached then)."""
        self._skip = mark

    @property
    def marks_arrive(self) -> bool:
        """Output marks have kept coming: a message handed out had all the output before it."""
        return self._marks_arrive

    @property
    def idle(self) -> bool:
        """Nothing arrived that was not read."""
        return self._queue.empty() and not self._parts

    # -- from the provider -------------------------------------------------------------

    def feed_stdout(self, text: str) -> None:
        pieces = text.split("\n")
        for complete in pieces[:-1]:
            line = "".join(self._parts) + complete if self._parts else complete
            self._parts, self._size = [], 0
            if not line.strip():
                continue
            if not self._started and not line.lstrip().startswith("{"):
                if self._mark >= self._skip:
                    self._on_output(line + "\n")  # a login shell's profile talking
                continue
            item = self._parse(line)
            if isinstance(item, tuple) and item[1] is not None and item[1] <= self._skip:
                continue  # replayed: handled before this attachment
            self._queue.put_nowait(item)
        if pieces[-1]:
            self._parts.append(pieces[-1])
            self._size += len(pieces[-1])
            if self._size > self._max:
                self._parts, self._size = [], 0
                self._queue.put_nowait(MessageTooLarge("a message from the sandbox exceeded the size limit"))

    def _parse(self, line: str) -> Any:
        try:
            message = parse_message(line)
        except Exception as exc:  # SandboxError: surfaces from receive()
            return exc
        self._started = True
        try:
            mark = json.loads(line).get("mark")
        except (ValueError, AttributeError):
            mark = None
        return (message, mark if isinstance(mark, int) else None)

    def feed_stderr(self, text: str) -> None:
        """The code's output, without the marks (which it records)."""
        if self._eat_newline and text.startswith("\n"):
            text = text[1:]
        self._eat_newline = False
        text = self._stderr + text
        self._stderr = ""
        out: list[str] = []
        pos = 0
        while True:
            start = text.find(_MARK_PREFIX[0], pos)
            if start < 0:
                self._keep(out, text[pos:])
                break
            self._keep(out, text[pos:start])
            match = _MARK.match(text, start)
            if match is not None:
                self._mark = max(self._mark, int(match.group(1)))
                self._mark_seen.set()
                pos = match.end()
                if pos == len(text) and not text.endswith("\n"):
                    self._eat_newline = True
                continue
            rest = text[start:]
            if len(rest) < 24 and (_MARK_PREFIX.startswith(rest) or re.fullmatch(r"\x1ecm:\d*", rest)):
                self._stderr = rest  # a mark cut in two: wait for the rest
                break
            self._keep(out, text[start])
            pos = start + 1
        data = "".join(out)
        if data:
            self._on_output(data)

    def _keep(self, out: list[str], text: str) -> None:
        """The code's output, unless it is a replay of what was handled before."""
        if text and self._mark >= self._skip:
            out.append(text)

    def sandbox_exited(self) -> None:
        self._queue.put_nowait(_EOF)

    # -- channel -------------------------------------------------------------------------

    async def _wait_mark(self, mark: int) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MARK_WAIT_SECONDS
        while self._mark < mark and self._marks_arrive:
            self._mark_seen.clear()
            left = deadline - loop.time()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                await asyncio.wait_for(self._mark_seen.wait(), left)
            except asyncio.TimeoutError:
                self._marks_arrive = False
                return

    async def receive(self) -> SandboxMessage | None:
        item = await self._queue.get()
        if item is _EOF:
            self._queue.put_nowait(_EOF)  # stay at end of stream
            return None
        if isinstance(item, Exception):
            raise item
        message, mark = item
        if mark is not None:
            await self._wait_mark(mark)
            self.last_mark = mark
        return message

    async def send(self, payload: dict[str, Any], *, fresh_line: bool = True) -> None:
        """Write one message. ``fresh_line``: start it with a newline, so that a message cut
        short by a failed request (its first pieces went out) ends as a line the runner
        skips instead of swallowing this one. Not for the bootstrap: the runner's first
        line must be it."""
        if self._send is None:
            raise SandboxError("the command channel is not bound to a process")
        data = (b"\n" if fresh_line else b"") + json.dumps(payload, separators=(",", ":")).encode() + b"\n"
        try:
            async with self._send_lock:
                for start in range(0, len(data), SEND_CHUNK_BYTES):
                    await self._send(data[start : start + SEND_CHUNK_BYTES])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            raise SandboxError(f"could not write to the sandbox process: {exc}") from exc

    async def send_answer(self, call_id: str, outcome: CallOutcome) -> None:
        await self.send(answer_payload(call_id, outcome))

    async def send_message(self, payload: dict[str, Any]) -> None:
        await self.send(payload)


class CommandTransport(CallbackTransport):
    """The provider's command API as the callback channel (E2B's ``commands``)."""

    name = "command"

    async def open(self, *, sandboxed: bool, network: bool) -> CallbackChannel:
        raise TypeError("a CommandChannel is opened by the runtime that owns the command (CommandChannel(...))")
