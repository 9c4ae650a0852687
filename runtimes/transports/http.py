"""``HttpCallbackTransport``: the sandbox POSTs its calls to an aiohttp server on the host.

Seed 000, appendix A, with three changes:

* **Reaching the host without a network.** A bubblewrap sandbox has its own, empty network
  namespace (``--unshare-net``): it cannot reach ``127.0.0.1`` of the host, and giving it
  the host's network would expose every local service. So by default the server listens on
  a **unix socket** in a fresh ``0700`` directory on the host, and only that socket file is
  bind-mounted into the sandbox (at ``/run/codemode/callback.sock``). The runner speaks
  HTTP over it with ``urllib`` and an ``http.client.HTTPConnection`` subclass whose
  ``connect()`` opens an ``AF_UNIX`` socket. Nothing else of the host is reachable.
  ``unix_socket=False`` listens on TCP instead (``host``, default ``127.0.0.1``, port
  ``port`` or an ephemeral one) for a sandbox that shares the host network
  (``PythonRuntime(network=True)`` or no isolation) or a remote one that can route to
  ``public_url``.
* **Authentication.** Every execution gets a fresh ``secrets.token_urlsafe(32)`` bearer
  token, sent to the runner inside the bootstrap on its stdin (never argv or environment,
  which other host processes can read). A request without it gets 401, a wrong one 403;
  tokens are compared with ``hmac.compare_digest``.
* **Concurrency.** ``POST /message`` carries every sandbox event. A sync tool call's
  response *is* its answer (one round trip); an ``async def`` call is acknowledged at once
  and its answer comes back through a long-poll ``POST /poll``, so gathered calls are all
  visible to the host before any is answered.

One server per execution: starting an aiohttp site on a unix socket costs about a
millisecond, and a server that dies with its execution can never route one run's answer
to another.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import secrets
import shutil
import socket
import tempfile
from typing import Any

from aiohttp import web

from ..execution import CallOutcome
from .base import CallbackChannel, CallbackTransport
from .protocol import (
    MAX_MESSAGE_BYTES,
    CallMessage,
    MessageTooLarge,
    SandboxMessage,
    answer_payload,
    parse_message,
)

#: Where the callback socket appears inside a bubblewrap sandbox.
SANDBOX_SOCKET_PATH = "/run/codemode/callback.sock"
#: A long poll returns empty after this long; the runner polls again.
POLL_SECONDS = 25.0

_TOO_LARGE = object()
_EXITED = object()


class HttpCallbackChannel(CallbackChannel):
    def __init__(self, *, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.token = secrets.token_urlsafe(32)
        self._expected = f"Bearer {self.token}".encode()
        self.params = {}
        self.binds = []
        self._max = max_message_bytes
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._sync_waiters: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._answers: list[dict[str, Any]] = []
        self._answers_ready = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._dir: str | None = None
        self._closed = False

    # -- server ---------------------------------------------------------------------

    async def start(self, sock: socket.socket) -> None:
        app = web.Application(middlewares=[self._auth], client_max_size=self._max)
        app.router.add_post("/message", self._on_message)
        app.router.add_post("/poll", self._on_poll)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.5)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        self._runner = runner

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        if not header:
            return web.Response(status=401, text="missing bearer token")
        if not hmac.compare_digest(header.encode(), self._expected):
            return web.Response(status=403, text="wrong bearer token")
        return await handler(request)

    async def _on_message(self, request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            self._queue.put_nowait(_TOO_LARGE)
            return web.Response(status=413)
        try:
            msg = parse_message(body)
        except Exception as exc:  # malformed: surfaces from receive()
            self._queue.put_nowait(exc)
            return web.Response(status=400)
        if isinstance(msg, CallMessage) and not msg.concurrent:
            waiter = asyncio.get_running_loop().create_future()
            self._sync_waiters[msg.call_id] = waiter
            self._queue.put_nowait(msg)
            answer = await waiter  # the response is the answer: one round trip per sync call
            return web.json_response({"answer": answer}, dumps=_dumps)
        self._queue.put_nowait(msg)
        return web.json_response({})

    async def _on_poll(self, request: web.Request) -> web.Response:
        try:
            await asyncio.wait_for(self._answers_ready.wait(), POLL_SECONDS)
        except asyncio.TimeoutError:
            pass
        answers, self._answers = self._answers, []
        self._answers_ready.clear()
        return web.json_response({"answers": answers}, dumps=_dumps)

    # -- channel --------------------------------------------------------------------

    async def receive(self) -> SandboxMessage | None:
        item = await self._queue.get()
        if item is _EXITED:
            self._queue.put_nowait(_EXITED)  # stay at end of stream
            return None
        if item is _TOO_LARGE:
            raise MessageTooLarge("a message from the sandbox exceeded the size limit")
        if isinstance(item, Exception):
            raise item
        return item

    async def send_answer(self, call_id: str, outcome: CallOutcome) -> None:
        payload = answer_payload(call_id, outcome)
        waiter = self._sync_waiters.pop(call_id, None)
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(payload)
            return
        self._answers.append(payload)
        self._answers_ready.set()

    def sandbox_exited(self) -> None:
        # Every request the sandbox made was queued before it could exit.
        self._queue.put_nowait(_EXITED)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for waiter in self._sync_waiters.values():
            waiter.cancel()
        self._sync_waiters.clear()
        self._answers_ready.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


class HttpCallbackTransport(CallbackTransport):
    """HTTP callbacks to the host (seed 000, appendix A).

    :param unix_socket: listen on a unix socket bind-mounted into the sandbox (default);
        False listens on TCP ``host:port``.
    :param host: TCP address to bind (``127.0.0.1``: never all interfaces by default).
    :param port: TCP port (0: an ephemeral one per execution).
    :param public_url: the URL the sandbox uses when it is not ``http://host:port`` (a
        remote sandbox reaching the worker through a tunnel).
    """

    name = "http"

    def __init__(
        self,
        *,
        unix_socket: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        public_url: str | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.unix_socket = unix_socket
        self.host = host
        self.port = port
        self.public_url = public_url
        self.max_message_bytes = max_message_bytes

    async def open(self, *, sandboxed: bool, network: bool) -> CallbackChannel:
        channel = HttpCallbackChannel(max_message_bytes=self.max_message_bytes)
        if self.unix_socket:
            directory = tempfile.mkdtemp(prefix="codemode-cb-")  # 0700: only this user reaches it
            channel._dir = directory
            path = os.path.join(directory, "callback.sock")
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(path)
                # The sandboxed code may run as another uid (nobody when the worker is
                # root): connect() needs write permission on the socket file. The 0700
                # directory keeps every other host user out.
                os.chmod(path, 0o666)
                await channel.start(sock)
            except BaseException:
                sock.close()
                await channel.aclose()
                raise
            inside = SANDBOX_SOCKET_PATH if sandboxed else path
            channel.binds = [(path, SANDBOX_SOCKET_PATH)] if sandboxed else []
            channel.params = {"kind": "http", "url": "http://sandbox", "token": channel.token, "unix_socket": inside}
            return channel
        if sandboxed and not network:
            raise ValueError(
                "a TCP callback cannot reach the host from a sandbox without network: "
                "use HttpCallbackTransport(unix_socket=True) or network=True"
            )
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.port))
            await channel.start(sock)
        except BaseException:
            sock.close()
            await channel.aclose()
            raise
        host, port = sock.getsockname()[:2]
        url = self.public_url or f"http://{'[' + host + ']' if ':' in host else host}:{port}"
        channel.params = {"kind": "http", "url": url, "token": channel.token, "unix_socket": None}
        return channel
