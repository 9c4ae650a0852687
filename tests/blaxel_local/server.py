"""A local Blaxel-compatible server: the control plane and each sandbox's API on one port.

Only what the unmodified ``blaxel`` SDK calls for the blaxel runtime:

* control plane (``client.with_base_url(URL)``): ``POST /sandboxes``, ``GET /sandboxes``,
  ``GET /sandboxes/{name}``, ``DELETE /sandboxes/{name}``;
* a sandbox's API (its URL is ``metadata.url`` of the record: ``URL/run/{name}``):
  ``PUT /filesystem/{path}``, ``POST /process``, ``GET /process/{id}``,
  ``GET /process/{id}/logs/stream`` (the output so far, then live: one line per log,
  ``stdout:``/``stderr:``), ``POST /process/{id}/stdin``, ``DELETE /process/{id}/kill``.

Every request needs ``X-Blaxel-Authorization: Bearer <key>`` and ``X-Blaxel-Workspace``
(any non-empty values, or ``--api-key``). Sandboxes are the local E2B server's (processes in
bubblewrap, ``tests/e2b_local/sandboxes.py``). Standby: a sandbox with no request and no open
stream for ``--standby-after`` seconds has its processes SIGSTOPped (as Blaxel's standby keeps
memory and processes); the next request wakes it. ``spec.network.firewall.rulesets``
with ``"proxy"`` and a proxy that forbids ``"*"`` gives the sandbox no network. Anything else
answers 404 and is logged on stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from tests.e2b_local.connect import ConnectError
from tests.e2b_local.sandboxes import Proc, Sandbox, SandboxRegistry

KEEPALIVE_SECONDS = 15.0
NO_EXPIRY = 10.0**9


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


def _error(status: int, message: str) -> web.Response:
    codes = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 404: "NOT_FOUND", 409: "CONFLICT"}
    return web.json_response({"code": status, "error": codes.get(status, "ERROR"), "message": message}, status=status)


class Missing(Exception):
    """A sandbox or process that does not exist: a 404 with the API's error body."""


@dataclass
class Box:
    """A Blaxel sandbox: the shared sandbox layer plus Blaxel's record."""

    name: str
    sandbox: Sandbox
    record: dict[str, Any]
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    streams: int = 0
    #: Every process started in it, by name and by pid (kept after they exit).
    procs: dict[str, Proc] = field(default_factory=dict)

    def find(self, identifier: str) -> Proc | None:
        return self.procs.get(identifier) or next((p for p in self.procs.values() if str(p.pid) == identifier), None)


def _no_network(network: dict[str, Any]) -> bool:
    rulesets = (network.get("firewall") or {}).get("rulesets") or []
    proxy = network.get("proxy") or {}
    return "proxy" in rulesets and "*" in (proxy.get("forbiddenDomains") or []) and not proxy.get("allowedDomains")


class LocalBlaxel:
    def __init__(self, root: str, *, api_key: str | None = None, standby_after: float = 1.0) -> None:
        self.registry = SandboxRegistry(root, envd_version="0")
        self.api_key = api_key
        self.standby_after = standby_after
        self.boxes: dict[str, Box] = {}
        self.base = ""
        self._standby: asyncio.Task[None] | None = None

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30, middlewares=[self._auth])
        r = app.router
        r.add_post("/sandboxes", self.create)
        r.add_get("/sandboxes", self.list)
        r.add_get("/sandboxes/{name}", self.get)
        r.add_delete("/sandboxes/{name}", self.delete)
        r.add_put("/run/{name}/filesystem/{path:.*}", self.write_file)
        r.add_post("/run/{name}/process", self.start)
        r.add_get("/run/{name}/process/{id}", self.process)
        r.add_get("/run/{name}/process/{id}/logs/stream", self.logs)
        r.add_post("/run/{name}/process/{id}/stdin", self.stdin)
        r.add_delete("/run/{name}/process/{id}/kill", self.kill)
        app.on_startup.append(self._start_standby)
        app.on_shutdown.append(self._shutdown)
        return app

    async def _start_standby(self, app: web.Application) -> None:
        self._standby = asyncio.create_task(self._standby_loop())

    async def _shutdown(self, app: web.Application) -> None:
        if self._standby is not None:
            self._standby.cancel()
        for name in list(self.boxes):
            await self._destroy(name)

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        key = request.headers.get("X-Blaxel-Authorization", "")
        if not key.startswith("Bearer ") or len(key) <= 7 or not request.headers.get("X-Blaxel-Workspace"):
            return _error(401, "missing X-Blaxel-Authorization or X-Blaxel-Workspace")
        if self.api_key is not None and key != f"Bearer {self.api_key}":
            return _error(401, "invalid API key")
        try:
            return await handler(request)
        except Missing as exc:
            return _error(404, str(exc))
        except web.HTTPNotFound:
            print(f"blaxel local: not implemented: {request.method} {request.path}", file=sys.stderr, flush=True)
            return _error(404, f"{request.method} {request.path} is not implemented by the local server")

    # -- standby ------------------------------------------------------------------------

    async def _standby_loop(self) -> None:
        while True:
            await asyncio.sleep(min(0.2, self.standby_after))
            now = time.monotonic()
            for box in self.boxes.values():
                idle = box.streams == 0 and now - box.last_used >= self.standby_after
                if idle and box.sandbox.state == "running":
                    box.sandbox.pause()  # SIGSTOP: memory and processes kept

    def _box(self, request: web.Request) -> Box:
        box = self.boxes.get(request.match_info["name"])
        if box is None:
            raise Missing(f"sandbox {request.match_info['name']} not found")
        box.last_used = time.monotonic()
        if box.sandbox.state == "paused":
            box.sandbox.resume(NO_EXPIRY)  # a request wakes a sandbox in standby
        return box

    # -- control plane --------------------------------------------------------------------

    async def create(self, request: web.Request) -> web.Response:
        body = await request.json()
        metadata = dict(body.get("metadata") or {})
        spec = dict(body.get("spec") or {})
        runtime = dict(spec.get("runtime") or {})
        name = metadata.get("name") or f"sandbox-{secrets.token_hex(4)}"
        if name in self.boxes:
            return _error(409, f"sandbox {name} already exists")
        envs = {str(e["name"]): str(e["value"]) for e in runtime.get("envs") or []}
        network = dict(spec.get("network") or {})
        sandbox = Sandbox(
            registry=self.registry,
            template=str(runtime.get("image") or "blaxel/base-image:latest"),
            timeout=NO_EXPIRY,
            metadata={},
            env_vars=envs,
            internet=not _no_network(network),
            auto_pause=False,
        )
        now = time.time()
        metadata.update(name=name, url=f"{self.base}/run/{name}", createdAt=_iso(now), workspace="local")
        record = {"metadata": metadata, "spec": spec, "status": "DEPLOYED"}
        self.boxes[name] = Box(name=name, sandbox=sandbox, record=record, created=now)
        return web.json_response(record)

    async def list(self, request: web.Request) -> web.Response:
        return web.json_response({"data": [b.record for b in self.boxes.values()], "meta": {"hasMore": False}})

    async def get(self, request: web.Request) -> web.Response:
        box = self.boxes.get(request.match_info["name"])
        if box is None:
            return _error(404, f"sandbox {request.match_info['name']} not found")
        return web.json_response(box.record)

    async def delete(self, request: web.Request) -> web.Response:
        box = self.boxes.get(request.match_info["name"])
        if box is None:
            return _error(404, f"sandbox {request.match_info['name']} not found")
        await self._destroy(box.name)
        return web.json_response({**box.record, "status": "TERMINATED"})

    async def _destroy(self, name: str) -> None:
        box = self.boxes.pop(name, None)
        if box is not None:
            await box.sandbox.destroy()

    # -- a sandbox's API ------------------------------------------------------------------

    async def write_file(self, request: web.Request) -> web.Response:
        box = self._box(request)
        host, inside = box.sandbox.host_path("/" + request.match_info["path"].lstrip("/"), for_write=True)
        if request.content_type == "multipart/form-data":  # fs.write_binary: the bytes in a "file" part
            form = await request.post()
            part = form["file"]
            data = part.file.read() if isinstance(part, web.FileField) else str(part).encode()
            os.makedirs(os.path.dirname(host), exist_ok=True)
            with open(host, "wb") as f:
                f.write(data)
            self.registry.own(host)
            return web.json_response({"message": "written", "path": inside})
        body = await request.json()
        if body.get("isDirectory"):
            os.makedirs(host, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(host), exist_ok=True)
            with open(host, "w", encoding="utf-8") as f:
                f.write(str(body.get("content") or ""))
        self.registry.own(host)
        return web.json_response({"message": "written", "path": inside})

    def _process_json(self, proc: Proc) -> dict[str, Any]:
        end = proc.end
        status = "running"
        if end is not None:
            status = "completed" if end.get("exitCode") == 0 else ("killed" if "killed" in str(end) else "failed")
        return {
            "command": " ".join(proc.config.get("args") or []),
            "completedAt": _iso(time.time()) if end is not None else "",
            "exitCode": int(end.get("exitCode", -1)) if end is not None else 0,
            "logs": "",
            "name": proc.tag or str(proc.pid),
            "pid": str(proc.pid),
            "startedAt": _iso(proc.started),
            "status": status,
            "stderr": "",
            "stdout": "",
            "workingDir": proc.config.get("cwd") or "/home/user",
        }

    async def start(self, request: web.Request) -> web.Response:
        box = self._box(request)
        body = await request.json()
        name = str(body.get("name") or f"proc-{secrets.token_hex(3)}")
        running = box.procs.get(name)
        if running is not None and running.end is None:
            return _error(400, f"a process named {name} is still running")
        spec = {"cmd": "/bin/sh", "args": ["-c", str(body["command"])], "envs": dict(body.get("env") or {})}
        if body.get("workingDir"):
            spec["cwd"] = body["workingDir"]
        timeout = int(body.get("timeout") or 0)
        try:
            proc = await box.sandbox.start(
                {"process": spec, "stdin": bool(body.get("stdin")), "tag": name},
                user="user",
                deadline_ms=timeout * 1000 or None,
                keep_history=True,
            )
        except ConnectError as err:
            return _error(400, err.message)
        box.procs[name] = proc
        return web.json_response(self._process_json(proc))

    def _proc(self, request: web.Request) -> tuple[Box, Proc]:
        box = self._box(request)
        proc = box.find(request.match_info["id"])
        if proc is None:
            raise Missing(f"process {request.match_info['id']} not found")
        return box, proc

    async def process(self, request: web.Request) -> web.Response:
        _, proc = self._proc(request)
        return web.json_response(self._process_json(proc))

    async def stdin(self, request: web.Request) -> web.Response:
        box, proc = self._proc(request)
        if proc.end is not None or not proc.stdin_open:
            return _error(409, f"process {proc.tag} has no open stdin")
        try:
            await box.sandbox.send_input(proc, await request.read())
        except ConnectError as err:
            return _error(409, err.message)
        return web.json_response({"message": "written"})

    async def kill(self, request: web.Request) -> web.Response:
        _, proc = self._proc(request)
        proc.signal_group(signal.SIGKILL)
        return web.json_response({"message": "killed"})

    async def logs(self, request: web.Request) -> web.StreamResponse:
        """The output written so far, then live, one ``stdout:``/``stderr:`` line per log."""
        box, proc = self._proc(request)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        proc.subscribers.add(queue)  # with the snapshot below in one step: nothing missed or doubled
        history = list(proc.history or [])
        ended = proc.end is not None
        box.streams += 1
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/plain; charset=utf-8"})
        partial = {"stdout": b"", "stderr": b""}

        async def emit(name: str, chunk: bytes, *, flush: bool = False) -> None:
            data = partial[name] + chunk
            *lines, partial[name] = data.split(b"\n")
            if flush and partial[name]:
                lines.append(partial[name])
                partial[name] = b""
            if lines:
                text = "".join(f"{name}:{line.decode('utf-8', 'replace')}\n" for line in lines)
                await response.write(text.encode())

        try:
            await response.prepare(request)
            for name, chunk in history:
                await emit(name, chunk)
            while not ended:
                try:
                    kind, value = await asyncio.wait_for(queue.get(), KEEPALIVE_SECONDS)
                except asyncio.TimeoutError:
                    await response.write(b"[keepalive]\n")
                    continue
                if kind == "data":
                    await emit(*value)
                else:
                    ended = True
            for name in partial:
                await emit(name, b"", flush=True)
            await response.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        finally:
            proc.subscribers.discard(queue)
            box.streams -= 1
            box.last_used = time.monotonic()
        return response


async def serve(host: str, port: int, root: str, *, api_key: str | None, standby_after: float) -> None:
    """Run until SIGINT/SIGTERM; prints one line with the base URL once listening."""
    server = LocalBlaxel(root, api_key=api_key, standby_after=standby_after)
    runner = web.AppRunner(server.app(), handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = site._server.sockets if site._server is not None else []  # type: ignore[union-attr]
    bound = sockets[0].getsockname()[1] if sockets else port
    server.base = f"http://{host}:{bound}"
    print(f"Blaxel local server listening on {server.base}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()
        for name in list(server.boxes):
            await server._destroy(name)
