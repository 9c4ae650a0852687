"""``StdioTransport``: JSON lines over the sandbox process's stdin and stdout.

The runner keeps private duplicates of fds 0 and 1 for this channel and points the code's
stdout at stderr before running it (``runtimes/runner/sandbox/``), so ``print`` and child
processes cannot write into the protocol. The fastest transport for a local process; it
needs nothing but the pipes, so it works with any isolation.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..execution import CallOutcome
from .base import CallbackChannel, CallbackTransport
from .protocol import MessageTooLarge, SandboxMessage, answer_payload, parse_message


class StdioChannel(CallbackChannel):
    """``token``: every message line starts with ``TOKEN `` and lines that do not are
    dropped (the pyodide runner's stdout is reachable by the code: a line it forges lacks
    the per-process token, which only the runner holds)."""

    uses_stdio = True

    def __init__(self, token: str | None = None) -> None:
        self.params = {"kind": "stdio"}
        self.binds = []
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._prefix = token.encode() + b" " if token else b""
        #: Lines dropped for lacking the token.
        self.dropped = 0

    def attach(self, process: asyncio.subprocess.Process) -> None:
        self._reader = process.stdout
        self._writer = process.stdin

    async def receive(self) -> SandboxMessage | None:
        assert self._reader is not None, "attach() the process first"
        line = await self._readline()  # readline turns an overrun into ValueError
        while self._prefix and line and not line.startswith(self._prefix):
            self.dropped += 1
            line = await self._readline()
        if not line:
            return None
        return parse_message(line[len(self._prefix) :])

    async def _readline(self) -> bytes:
        assert self._reader is not None
        try:
            return await self._reader.readline()
        except (asyncio.LimitOverrunError, ValueError):
            raise MessageTooLarge("a message from the sandbox exceeded the size limit") from None

    async def send_answer(self, call_id: str, outcome: CallOutcome) -> None:
        await self.send_message(answer_payload(call_id, outcome))

    async def send_message(self, payload: dict[str, Any]) -> None:
        assert self._writer is not None, "attach() the process first"
        data = json.dumps(payload, separators=(",", ":")).encode() + b"\n"
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (BrokenPipeError, ConnectionResetError, RuntimeError):
            pass  # the sandbox is gone; receive() returns None

    async def aclose(self) -> None:
        if self._writer is not None and not self._writer.is_closing():
            self._writer.close()


class StdioTransport(CallbackTransport):
    """JSON lines on the process pipes (seed 000, appendix B, mechanism 3)."""

    name = "stdio"

    async def open(self, *, sandboxed: bool, network: bool) -> CallbackChannel:
        return StdioChannel()
