"""Callback transports: how sandboxed code that cannot be paused calls the host.

``StdioTransport`` (JSON lines on the process pipes), ``HttpCallbackTransport`` (an
aiohttp server on a unix socket or loopback, bearer token per execution) and
``CommandChannel`` (``command.py``: JSON lines over a cloud provider's command API, E2B's). See ``base`` for
the two-object design and ``http`` for how a sandbox without network reaches the host.
The HTTP transport imports aiohttp only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import CallbackChannel, CallbackTransport
from .protocol import MAX_MESSAGE_BYTES, MessageTooLarge
from .stdio import StdioTransport

if TYPE_CHECKING:
    from .http import HttpCallbackTransport


def get_transport(transport: str | CallbackTransport) -> CallbackTransport:
    """``"stdio"`` / ``"http"`` or an instance (returned as is)."""
    if isinstance(transport, CallbackTransport):
        return transport
    if transport == "stdio":
        return StdioTransport()
    if transport == "http":
        from .http import HttpCallbackTransport

        return HttpCallbackTransport()
    raise ValueError(f"unknown transport {transport!r}: use 'stdio', 'http' or a CallbackTransport")


def __getattr__(name: str) -> Any:
    if name == "HttpCallbackTransport":
        from .http import HttpCallbackTransport

        return HttpCallbackTransport
    raise AttributeError(name)


__all__ = [
    "MAX_MESSAGE_BYTES",
    "CallbackChannel",
    "CallbackTransport",
    "HttpCallbackTransport",
    "MessageTooLarge",
    "StdioTransport",
    "get_transport",
]
