"""The official MCP Python client against ``codemode mcp`` (a real subprocess): over stdio,
the client starts the server; over HTTP, a ``Background`` server and the client's streamable
HTTP transport with a bearer token. ``Person`` answers the client's elicitation as a test says."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import ElicitResult

from tests.cli.runner import REPO

TOOLS = "tests.integrations.mcp_server.catalog_tools"


def mcp_args(*extra: str) -> list[str]:
    return ["-m", "codemode", "mcp", "--tools", TOOLS, *extra]


def stdio_server(env: dict[str, str], *extra: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=mcp_args(*extra), env=env, cwd=str(REPO))


def http_transport(url: str, token: str | None) -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


@dataclass
class Person:
    """The person in front of the client: what they answer, and what they were asked."""

    #: ``approve``, ``deny`` (both accept the form), ``decline`` or ``cancel``.
    answer: str = "approve"
    comment: str = ""
    #: Edited arguments (a JSON object) with approve; the result (JSON) with answer.
    arguments: str = ""
    result: str = ""
    #: Seconds before answering (longer than ``--approval-wait``: no answer in time).
    delay: float = 0.0
    #: Run when asked, before answering (e.g. kill a worker).
    on_ask: Callable[[], Awaitable[None]] | None = None
    asked: list[str] = field(default_factory=list)

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        if self.on_ask is not None:
            await self.on_ask()
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.answer in ("decline", "cancel"):
            return ElicitResult(action=self.answer)
        content = {"decision": self.answer, "comment": self.comment}
        if self.arguments:
            content["arguments"] = self.arguments
        if self.result:
            content["result"] = self.result
        return ElicitResult(action="accept", content=content)


class McpSession:
    """A connected ``mcp.Client``, held open by a task of its own (the SDK's task groups
    must be entered and left in one task; tests call it from theirs)."""

    def __init__(self, server: Any, **client_options: Any) -> None:
        self.server = server
        self.options = client_options
        self.client: Client = None  # type: ignore[assignment]
        self._ready = asyncio.Event()
        self._close = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _hold(self) -> None:
        async with Client(self.server, **self.options) as client:
            self.client = client
            self._ready.set()
            await self._close.wait()

    async def __aenter__(self) -> Client:
        self._task = asyncio.create_task(self._hold())
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({self._task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if self._task.done():
            ready.cancel()
            await self._task  # raises why it could not connect
        if not self._ready.is_set():
            raise AssertionError("the MCP client did not connect within 60 s")
        return self.client

    async def __aexit__(self, *exc: object) -> None:
        self._close.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, 60)
