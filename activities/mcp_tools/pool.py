"""One live connection per configured MCP server, for the whole life of a worker.

Built on the MCP SDK's own client (``mcp.Client`` over its stdio, streamable-HTTP and SSE
transports): the SDK spawns the server, negotiates the protocol, multiplexes concurrent
requests on one connection, sends a cancellation when a call's task is cancelled, and
shuts a stdio server down the way the spec says (close stdin, wait, kill the tree).

What this module adds is the lifecycle a worker needs:

- each connection is owned by one task from open to close (anyio's cancel scopes must be
  left in the task that entered them), and calls from any activity share it;
- the transport's read side is watched, so a server that died (its stdout closed) or an
  HTTP session that broke is known dead before the next call is sent: that call restarts
  the server first, and a failure to (re)start proves the request was never sent
  (``McpUnreachable``), which is what lets a non-idempotent tool be retried safely;
- the server's stderr goes to ``<data dir>/mcp-logs/<server>.log`` (its tail is quoted
  when a server fails to start);
- ``aclose()`` closes every server with the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import IO, Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CallToolResult, Implementation, Tool

from .config import McpConfig, ServerConfig

log = logging.getLogger(__name__)

#: Pages of tools/list followed at most (a server whose cursor never ends cannot hang a start).
MAX_TOOL_PAGES = 100
#: Bytes of a server's stderr quoted when it fails to start.
STDERR_TAIL = 2000


class McpUnreachable(ConnectionError):
    """The server could not be started or reached: no request was sent to it."""


def _client_info() -> Implementation:
    try:
        ours = package_version("durable-codemode")
    except PackageNotFoundError:  # pragma: no cover - a source checkout without install
        ours = "0"
    return Implementation(name="durable-codemode", version=ours)


class _WatchedRead:
    """A transport's read stream that calls ``on_end`` when it ends: the stdio server's
    stdout closed (it exited or was killed), or the HTTP transport gave up."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:  # the dispatcher reads the sender's context from it
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)


@contextlib.asynccontextmanager
async def _watched(transport: Any, on_end: Callable[[], None]) -> AsyncIterator[Any]:
    try:
        async with transport as (read, write):
            yield _WatchedRead(read, on_end), write
    finally:
        on_end()


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """Streamable HTTP with the configured headers (an HTTP client of our own, so closed here)."""
    async with create_mcp_http_client(headers=headers or None) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            yield streams


class _Connection:
    """One server process (or HTTP session) and the client talking to it."""

    def __init__(self, name: str, server: ServerConfig, errlog: IO[str] | None) -> None:
        self.name = name
        self.server = server
        self.errlog = errlog
        self.ended = False
        self.started = time.monotonic()
        self._ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def _transport(self) -> Any:
        s = self.server
        if s.transport == "stdio":
            assert s.command is not None
            params = StdioServerParameters(command=s.command, args=s.args, env=s.env or None, cwd=s.cwd)
            return stdio_client(params, errlog=self.errlog) if self.errlog is not None else stdio_client(params)
        assert s.url is not None
        if s.transport == "sse":
            return sse_client(s.url, headers=s.headers or None)
        return _http_transport(s.url, s.headers)

    def _end(self) -> None:
        self.ended = True

    async def open(self) -> Client:
        self._task = asyncio.create_task(self._own(), name=f"mcp server {self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), self.server.startup_timeout)
        except asyncio.TimeoutError:
            await self.close()
            raise McpUnreachable(f"did not answer within {self.server.startup_timeout:g}s of starting") from None
        except McpUnreachable:
            await self.close()
            raise

    async def _own(self) -> None:
        try:
            client = Client(_watched(self._transport(), self._end), client_info=_client_info(), cache=None)
            async with client:
                self._ready.set_result(client)
                await self._stop.wait()
        except BaseException as err:  # noqa: BLE001 - reported to whoever waits for it
            self.ended = True
            if not self._ready.done():
                self._ready.set_exception(McpUnreachable(_describe_error(err)))
            elif not isinstance(err, asyncio.CancelledError):
                log.info("MCP server %s: connection ended: %s", self.name, _describe_error(err))
        finally:
            self.ended = True

    @property
    def alive(self) -> bool:
        return (
            self._ready.done()
            and not self._ready.cancelled()
            and self._ready.exception() is None
            and not self.ended
            and self._task is not None
            and not self._task.done()
        )

    @property
    def client(self) -> Client:
        return self._ready.result()

    async def close(self) -> None:
        self._stop.set()
        if self._task is None:
            return
        if not self._ready.done():
            self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


def _describe_error(err: BaseException) -> str:
    """One line for an error that may be an exception group (anyio task groups raise them)."""
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(_describe_error(e) for e in err.exceptions)
    text = str(err) or type(err).__name__
    return text if type(err).__name__ in text else f"{type(err).__name__}: {text}"


class ServerPool:
    """Live connections to the configured servers, keyed by server name. ``connection()``
    hands out a live one, restarting a server that died; ``aclose()`` closes them all."""

    def __init__(self, config: McpConfig, *, log_dir: Path | None = None) -> None:
        self.config = config
        self.log_dir = log_dir
        self._live: dict[str, _Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._logs: dict[str, IO[str]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        #: How many times each server was started (1 after ``start``; more after restarts).
        self.starts: dict[str, int] = {}
        self.closed = False

    def _errlog(self, name: str) -> IO[str] | None:
        if self.log_dir is None or self.config.servers[name].transport != "stdio":
            return None
        if name not in self._logs:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._logs[name] = open(self.log_dir / f"{name}.log", "a", buffering=1)  # noqa: SIM115
        return self._logs[name]

    def stderr_tail(self, name: str) -> str:
        f = self._logs.get(name)
        if f is None:
            return ""
        try:
            with open(f.name, "rb") as log_file:
                log_file.seek(0, 2)
                size = log_file.tell()
                log_file.seek(max(0, size - STDERR_TAIL))
                return log_file.read().decode(errors="replace").strip()
        except OSError:
            return ""

    async def connection(self, name: str) -> _Connection:
        """A live connection to ``name``: the current one, or a new server process when the
        last one died. Raises ``McpUnreachable`` (nothing was sent) when it cannot start."""
        if self.closed:
            raise McpUnreachable("the worker is shutting down")
        conn = self._live.get(name)
        if conn is not None and conn.alive:
            return conn
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            conn = self._live.get(name)
            if conn is not None and conn.alive:
                return conn
            if conn is not None:
                log.warning("MCP server %s is gone; starting it again", name)
                self._close_later(conn)
                del self._live[name]
            server = self.config.servers[name]
            errlog = self._errlog(name)
            if errlog is not None:
                errlog.write(f"--- codemode: starting {self.config.describe(name)} ---\n")
            conn = _Connection(name, server, errlog)
            try:
                await conn.open()
            except McpUnreachable as err:
                tail = self.stderr_tail(name)
                where = f" (started as: {self.config.describe(name)})"
                raise McpUnreachable(
                    f"MCP server {name!r} could not be started: {err}{where}"
                    + (f"; its stderr ends: {tail}" if tail else "")
                ) from None
            self._live[name] = conn
            self.starts[name] = self.starts.get(name, 0) + 1
            return conn

    def _close_later(self, conn: _Connection) -> None:
        task = asyncio.get_running_loop().create_task(conn.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def list_tools(self, name: str) -> list[Tool]:
        """Every tool the server lists (all pages)."""
        client = (await self.connection(name)).client
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                return tools
        raise RuntimeError(f"MCP server {name!r} listed more than {MAX_TOOL_PAGES} pages of tools")

    async def call_tool(
        self, name: str, tool: str, arguments: dict[str, Any], meta: dict[str, Any] | None = None
    ) -> CallToolResult:
        """Call a tool. ``McpUnreachable``: not sent. Anything else after the send leaves
        the outcome unknown (the caller decides whether the tool may be called again)."""
        conn = await self.connection(name)
        return await conn.client.call_tool(tool, arguments, meta=meta)  # type: ignore[arg-type]

    async def aclose(self) -> None:
        """Close every server (each stdio server gets the SDK's shutdown: stdin closed,
        then SIGTERM and SIGKILL after a grace period)."""
        self.closed = True
        conns, self._live = list(self._live.values()), {}
        await asyncio.gather(*(c.close() for c in conns), *list(self._closing), return_exceptions=True)
        for f in self._logs.values():
            with contextlib.suppress(OSError):
                f.close()
        self._logs.clear()
