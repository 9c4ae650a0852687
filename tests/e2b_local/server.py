"""The HTTP side of the local E2B server: the control plane and envd on one aiohttp port.

A request carrying ``E2b-Sandbox-Id`` goes to envd (files, health, Connect RPC of the
process service), as the real edge proxy routes it; anything else is the control-plane
REST API, authenticated by any non-empty ``X-API-KEY``. Status codes and bodies follow
what the unmodified SDK parses (``../shared/research/e2b-wire.md`` sections 2 and 3).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import time
import urllib.parse
from typing import Any

from aiohttp import BodyPartReader, web

from . import connect as rpc
from .connect import ConnectError
from .sandboxes import Proc, Sandbox, SandboxRegistry

ENVD_PORT = "49983"
DEFAULT_KEEPALIVE = 90.0
_SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM, 9: signal.SIGKILL, 15: signal.SIGTERM}


def _error(status: int, message: str, **headers: str) -> web.Response:
    return web.json_response({"code": status, "message": message}, status=status, headers=headers or None)


def _not_running(sandbox_id: str) -> web.Response:
    """What the edge proxy answers for an unknown, killed or paused sandbox."""
    body = {"sandboxId": sandbox_id, "message": "The sandbox was not found", "code": 502}
    return web.json_response(body, status=502)


class LocalE2B:
    def __init__(self, root: str, *, envd_version: str = "0.6.13", api_key: str | None = None) -> None:
        self.registry = SandboxRegistry(root, envd_version=envd_version)
        self.api_key = api_key

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._route])
        r = app.router
        r.add_post("/v2/sandboxes", self.create)
        r.add_get("/v2/sandboxes", self.list)
        r.add_get("/sandboxes", self.list)
        r.add_post("/v2/sandboxes/{id}/connect", self.connect)
        r.add_post("/sandboxes/{id}/resume", self.connect)
        r.add_post("/sandboxes/{id}/pause", self.pause)
        r.add_delete("/sandboxes/{id}", self.kill)
        r.add_post("/sandboxes/{id}/timeout", self.set_timeout)
        r.add_post("/sandboxes/{id}/refreshes", self.refresh)
        r.add_get("/sandboxes/{id}", self.get_info)
        r.add_get("/v2/sandboxes/{id}", self.get_info)
        r.add_get("/sandboxes/{id}/metrics", self.metrics)
        app.on_shutdown.append(self._on_shutdown)
        return app

    async def _on_shutdown(self, app: web.Application) -> None:
        await self.registry.close()

    @web.middleware
    async def _route(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """envd by header (as the edge proxy routes), else the control plane by path."""
        if "E2b-Sandbox-Id" in request.headers:
            return await self.envd(request)
        key = request.headers.get("X-API-KEY", "")
        if not key or (self.api_key is not None and key != self.api_key):
            return _error(401, "Invalid API key")
        try:
            return await handler(request)
        except web.HTTPException as exc:
            if exc.content_type == "application/json":
                raise
            return _error(exc.status, f"{request.method} {request.path}: {exc.reason}")

    def _sandbox(self, request: web.Request) -> Sandbox | None:
        return self.registry.get(request.match_info["id"])

    # -- control plane ------------------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any]:
        if not request.can_read_body:
            return {}
        try:
            body = await request.json()
        except ValueError:
            raise web.HTTPBadRequest(
                text='{"code":400,"message":"body is not JSON"}', content_type="application/json"
            ) from None
        return body if isinstance(body, dict) else {}

    def _sandbox_json(self, sbx: Sandbox) -> dict[str, Any]:
        return {
            "templateID": sbx.template,
            "sandboxID": sbx.id,
            "clientID": "local",
            "alias": sbx.template,
            "envdVersion": self.registry.envd_version,
            "envdAccessToken": sbx.token,
            "domain": None,
            "trafficAccessToken": None,
        }

    async def create(self, request: web.Request) -> web.Response:
        sbx = self.registry.create(await self._body(request))
        return web.json_response(self._sandbox_json(sbx), status=201)

    async def connect(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        sbx = self._sandbox(request)
        if sbx is None:
            return _error(404, f"Paused sandbox {request.match_info['id']} not found")
        timeout = float(body.get("timeout") or 300)
        if sbx.state == "paused":
            if body.get("memory") is False:
                sbx.pause(keep_memory=False)
            sbx.resume(timeout)
            return web.json_response(self._sandbox_json(sbx), status=201)
        sbx.end_at = max(sbx.end_at, time.time() + timeout)  # a running sandbox is only extended
        sbx.schedule_expiry()
        return web.json_response(self._sandbox_json(sbx), status=200)

    async def pause(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        sbx = self._sandbox(request)
        if sbx is None:
            return _error(404, f"sandbox {request.match_info['id']} not found")
        if sbx.state == "paused":
            return _error(409, f"sandbox {sbx.id} is already paused")
        sbx.pause(keep_memory=body.get("memory") is not False)
        return web.Response(status=204)

    async def kill(self, request: web.Request) -> web.Response:
        if not await self.registry.kill(request.match_info["id"]):
            return _error(404, f"sandbox {request.match_info['id']} not found")
        return web.Response(status=204)

    async def set_timeout(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        sbx = self._sandbox(request)
        if sbx is None:
            return _error(404, f"sandbox {request.match_info['id']} not found")
        sbx.end_at = time.time() + float(body.get("timeout") or 0)
        sbx.schedule_expiry()
        return web.Response(status=204)

    async def refresh(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        sbx = self._sandbox(request)
        if sbx is None:
            return _error(404, f"sandbox {request.match_info['id']} not found")
        sbx.end_at = max(sbx.end_at, time.time() + float(body.get("duration") or 60))
        sbx.schedule_expiry()
        return web.Response(status=204)

    async def get_info(self, request: web.Request) -> web.Response:
        sbx = self._sandbox(request)
        if sbx is None:
            return _error(404, f"sandbox {request.match_info['id']} not found")
        return web.json_response(sbx.detail(self.registry.envd_version))

    async def metrics(self, request: web.Request) -> web.Response:
        if self._sandbox(request) is None:
            return _error(404, f"sandbox {request.match_info['id']} not found")
        return web.json_response([])

    async def list(self, request: web.Request) -> web.Response:
        states = {s for s in request.query.get("state", "running,paused").split(",") if s}
        wanted: dict[str, str] = {}
        if request.query.get("metadata"):
            for k, v in urllib.parse.parse_qsl(request.query["metadata"], keep_blank_values=True):
                wanted[urllib.parse.unquote(k)] = urllib.parse.unquote(v)
        template = request.query.get("template")
        items = [
            sbx.detail(self.registry.envd_version)
            for sbx in sorted(self.registry.sandboxes.values(), key=lambda s: s.started_at)
            if sbx.state in states
            and all(sbx.metadata.get(k) == v for k, v in wanted.items())
            and (template is None or sbx.template == template)
        ]
        if request.query.get("order") == "desc":
            items.reverse()
        return web.json_response(items)

    # -- envd -----------------------------------------------------------------------------------

    async def envd(self, request: web.Request) -> web.StreamResponse:
        sandbox_id = request.headers["E2b-Sandbox-Id"]
        sbx = self.registry.get(sandbox_id)
        if sbx is None or sbx.state != "running":
            return _not_running(sandbox_id)
        if request.headers.get("E2b-Sandbox-Port", ENVD_PORT) != ENVD_PORT:
            body = {"sandboxId": sandbox_id, "message": "The sandbox is running but port is not open", "code": 502}
            return web.json_response(body, status=502)
        is_rpc = request.path.startswith(("/process.Process/", "/filesystem.Filesystem/"))
        if request.headers.get("X-Access-Token") != sbx.token:
            if is_rpc:
                return rpc.unary_error(ConnectError("unauthenticated", "invalid access token"))
            return _error(401, "invalid access token")
        user = _user(request)
        path = request.path
        if path == "/health" and request.method == "GET":
            return web.Response(status=204)
        if path == "/files" and request.method == "GET":
            return await self.read_file(request, sbx)
        if path == "/files" and request.method == "POST":
            return await self.write_files(request, sbx)
        if path == "/process.Process/Start":
            return await self.stream(request, sbx, start=True, user=user)
        if path == "/process.Process/Connect":
            return await self.stream(request, sbx, start=False, user=user)
        method = path.rsplit("/", 1)[-1]
        handler = (
            {
                "SendInput": self.send_input,
                "CloseStdin": self.close_stdin,
                "SendSignal": self.send_signal,
                "List": self.list_processes,
            }.get(method)
            if path.startswith("/process.Process/")
            else None
        )
        if handler is None:
            return rpc.unary_error(ConnectError("unimplemented", f"{path} is not implemented by the local server"))
        try:
            return rpc.unary_response(await handler(sbx, await rpc.read_unary(request)))
        except ConnectError as err:
            return rpc.unary_error(err)

    # files

    async def read_file(self, request: web.Request, sbx: Sandbox) -> web.StreamResponse:
        host, inside = sbx.host_path(request.query.get("path", ""), for_write=False)
        if os.path.isdir(host):
            return _error(400, f"path '{inside}' is a directory")
        if not os.path.isfile(host):
            return _error(404, f"path '{inside}' does not exist")
        try:
            data = await asyncio.to_thread(_read_bytes, host)
        except PermissionError:
            return _error(403, f"permission denied: '{inside}'")
        return web.Response(body=data, content_type="application/octet-stream")

    async def write_files(self, request: web.Request, sbx: Sandbox) -> web.Response:
        query_path = request.query.get("path")
        written: list[dict[str, str]] = []
        if request.content_type.startswith("multipart/"):
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue
                target = query_path or part.filename or ""
                written.append(await self._write(sbx, target, await part.read()))
        else:
            if not query_path:
                return _error(400, "the path query parameter is required for an octet-stream upload")
            written.append(await self._write(sbx, query_path, await request.read()))
        if not written:
            return _error(400, "no file in the request")
        return web.json_response(written)

    async def _write(self, sbx: Sandbox, target: str, data: bytes) -> dict[str, str]:
        host, inside = sbx.host_path(target, for_write=True)
        if os.path.isdir(host):
            raise web.HTTPBadRequest(text=json.dumps({"code": 400, "message": f"path '{inside}' is a directory"}),
                                     content_type="application/json")  # fmt: skip
        made = await asyncio.to_thread(_write_bytes, host, data)
        sbx.registry.own(*made, host)
        return {"name": os.path.basename(inside), "type": "file", "path": inside}

    # process streams

    async def stream(self, request: web.Request, sbx: Sandbox, *, start: bool, user: str) -> web.StreamResponse:
        try:
            message = rpc.read_envelope(await request.read())
        except ConnectError as err:
            return rpc.unary_error(err)
        timeout_ms = int(request.headers.get("connect-timeout-ms") or 0) or None
        keepalive = float(request.headers.get("Keepalive-Ping-Interval") or DEFAULT_KEEPALIVE)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        proc: Proc | None = None
        retained: tuple[int, dict[str, Any]] | None = None
        error: ConnectError | None = None
        try:
            if start:
                proc = await sbx.start(message, user=user, deadline_ms=timeout_ms)
            else:
                selector = message.get("process") or {}
                proc = sbx.lookup(selector)
                if proc is None:
                    retained = sbx.retained_end(selector)
                    if retained is None:
                        what = f"pid {selector.get('pid')}" if "pid" in selector else f"tag {selector.get('tag')!r}"
                        error = ConnectError("not_found", f"process with {what} not found")
        except ConnectError as err:
            error = err
        if proc is not None:
            proc.subscribers.add(queue)  # before the start event: nothing after it is missed
        transport = request.transport
        if transport is not None:
            sbx.streams.add(transport)
        response = await rpc.open_stream(request)
        try:
            if error is not None:
                await rpc.end_stream(response, error)
                return response
            pid = proc.pid if proc is not None else retained[0]  # type: ignore[index]
            await response.write(rpc.frame({"event": {"start": {"pid": pid}}}))
            if retained is not None:
                await response.write(rpc.frame({"event": {"end": retained[1]}}))
                await rpc.end_stream(response)
                return response
            assert proc is not None
            if proc.end is not None:  # ended between lookup and subscribe
                queue.put_nowait(("end", proc.end))
            deadline = None if start or timeout_ms is None else time.monotonic() + timeout_ms / 1000
            while True:
                wait = keepalive if deadline is None else min(keepalive, deadline - time.monotonic())
                if wait <= 0:
                    await rpc.end_stream(response, ConnectError("deadline_exceeded", "the stream reached its timeout"))
                    return response
                try:
                    kind, value = await asyncio.wait_for(queue.get(), wait)
                except asyncio.TimeoutError:
                    if deadline is None or time.monotonic() < deadline:
                        await response.write(rpc.frame({"event": {"keepalive": {}}}))
                    continue
                if kind == "data":
                    name, chunk = value
                    await response.write(rpc.frame({"event": {"data": {name: base64.b64encode(chunk).decode()}}}))
                else:
                    await response.write(rpc.frame({"event": {"end": value}}))
                    await rpc.end_stream(response)
                    return response
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        finally:
            if transport is not None:
                sbx.streams.discard(transport)
            if proc is not None:
                proc.subscribers.discard(queue)

    # unary process calls

    def _proc(self, sbx: Sandbox, message: dict[str, Any]) -> Proc:
        selector = message.get("process") or {}
        proc = sbx.lookup(selector)
        if proc is None:
            raise ConnectError("not_found", f"process with pid {selector.get('pid')} not found")
        return proc

    async def send_input(self, sbx: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc(sbx, message)
        data = (message.get("input") or {}).get("stdin")
        if data is None:
            raise ConnectError("invalid_argument", "only stdin input is supported")
        await sbx.send_input(proc, base64.b64decode(data))
        return {}

    async def close_stdin(self, sbx: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        sbx.close_stdin(self._proc(sbx, message))
        return {}

    async def send_signal(self, sbx: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        proc = self._proc(sbx, message)
        sig = _SIGNALS.get(message.get("signal"))  # type: ignore[arg-type]
        if sig is None:
            raise ConnectError("unimplemented", f"signal {message.get('signal')!r} is not supported")
        proc.signal_group(sig)
        return {}

    async def list_processes(self, sbx: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        processes = []
        for proc in sbx.procs.values():
            item: dict[str, Any] = {"pid": proc.pid, "config": proc.config}
            if proc.tag:
                item["tag"] = proc.tag
            processes.append(item)
        return {"processes": processes}


def _user(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    if header.startswith("Basic "):
        with contextlib.suppress(ValueError):
            name = base64.b64decode(header[6:]).decode().split(":", 1)[0]
            if name:
                return name
    return request.query.get("username") or "user"


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write_bytes(path: str, data: bytes) -> list[str]:
    """Write ``path`` (creating its parents); returns the directories it created."""
    made: list[str] = []
    parent = os.path.dirname(path)
    missing = []
    while parent and not os.path.isdir(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for directory in reversed(missing):
        os.mkdir(directory, 0o755)
        made.append(directory)
    with open(path, "wb") as f:
        f.write(data)
    return made


async def serve(host: str, port: int, root: str, *, envd_version: str, api_key: str | None) -> None:
    """Run until SIGINT/SIGTERM; prints one line with the base URL once listening."""
    server = LocalE2B(root, envd_version=envd_version, api_key=api_key)
    runner = web.AppRunner(server.app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
    bound = sockets[0].getsockname()[1] if sockets else port
    print(f"E2B local server listening on http://{host}:{bound}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await server.registry.close()
