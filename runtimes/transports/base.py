"""``CallbackTransport``: how a sandbox that cannot be paused reaches the host (seed 000).

A sandbox running real CPython pauses itself: each tool stub blocks on I/O until the host
answers. The transport is that I/O. It is public API because choosing it is an operational
concern (a firewall, a NAT, a provider's own channel), not an implementation detail.

Two objects, like ``CodeRuntime`` / ``CodeExecution``:

* ``CallbackTransport`` is configuration and a factory (``StdioTransport()``,
  ``HttpCallbackTransport(...)``), shared by every execution of a runtime.
* ``CallbackChannel`` is one execution's live channel: a fresh token, a fresh server or the
  pipes of one process. ``receive()`` yields the sandbox's messages in order (``None`` once
  the sandbox is gone) and ``send_answer()`` hands one call's outcome back.

The runtime (``runtimes/python.py``) starts the process, writes the bootstrap (which
carries ``channel.params``, secrets included, on stdin: never in argv or the environment)
and drives ``receive`` / ``send_answer``; a channel never interprets the code's events.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any

from ..execution import CallOutcome
from .protocol import SandboxMessage


class CallbackChannel(ABC):
    """One execution's channel between the host and the sandbox runner."""

    #: The runner's ``transport`` bootstrap entry: ``{"kind": "stdio"}`` or
    #: ``{"kind": "http", "url", "token", "unix_socket"}``.
    params: dict[str, Any]
    #: ``(host_path, sandbox_path)`` files the sandbox needs bind-mounted (a unix socket).
    binds: list[tuple[str, str]]
    #: True when the protocol runs over the process's stdin/stdout pipes.
    uses_stdio: bool = False

    def attach(self, process: asyncio.subprocess.Process) -> None:
        """Called once the sandbox process exists (its pipes may carry the protocol)."""
        return None

    @abstractmethod
    async def receive(self) -> SandboxMessage | None:
        """The next message of the sandbox; ``None`` when it is gone. Raises
        ``MessageTooLarge`` or ``SandboxError`` (a malformed message)."""

    @abstractmethod
    async def send_answer(self, call_id: str, outcome: CallOutcome) -> None:
        """Deliver one call's outcome. Never raises because the sandbox went away:
        ``receive()`` reports that."""

    def sandbox_exited(self) -> None:
        """The process is gone: wake a pending ``receive()`` once queued messages are read."""
        return None

    async def send_message(self, payload: dict[str, Any]) -> None:
        """Send the runner a message of the host's own (a session's next ``cell``). Only
        channels whose runner reads messages at any time (stdio, the command channel)."""
        from ..errors import CapabilityError

        raise CapabilityError(f"the {type(self).__name__} cannot carry a session's cells; use the stdio transport")

    async def aclose(self) -> None:
        return None


class CallbackTransport(ABC):
    """A way for sandboxed code to call the host; opens one channel per execution."""

    #: ``stdio`` or ``http`` (or a custom name).
    name: str = "transport"

    @abstractmethod
    async def open(self, *, sandboxed: bool, network: bool) -> CallbackChannel:
        """Open a channel for one execution. ``sandboxed``: the code runs in its own mount
        and network namespaces, so host paths must be bind-mounted (``channel.binds``);
        ``network``: the sandbox shares the host's network."""
