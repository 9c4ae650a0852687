"""A local Modal-compatible server: the control plane and the task command router on one
grpclib port, built from the SDK's own generated base classes (``modal_proto``).

Only the RPCs the modal runtime's path calls are implemented; any other answers
UNIMPLEMENTED and is logged on stderr ("modal local: unimplemented RPC ..."):

* control plane: ``AuthTokenGet`` (a JWT with an ``exp``: the V2 client needs one and does not
  check its signature), ``AppGetOrCreate``, ``ImageFromId``, ``SandboxCreateV2``,
  ``SandboxWaitV2``, ``SandboxGetTaskIdV2``, ``SandboxGetCommandRouterAccess`` (the router is
  this same port, plain http: the client accepts that on localhost only), ``SandboxListV2``,
  ``SandboxTagsGetV2``, ``SandboxTerminateV2``;
* command router: ``SandboxStdioReadV2`` (the entrypoint's output from a byte offset, then
  live), ``SandboxStdinWriteV2`` (offset-idempotent: bytes before the offset already written
  are dropped, as a retried write), ``TaskExecStart``, ``TaskExecStdinWrite`` (the relay
  exec each attachment starts).

Sandboxes are the local E2B server's (processes in bubblewrap, ``tests/e2b_local``); a
sandbox runs until its entrypoint exits, its ``timeout`` passes or it is terminated.
``block_network`` gives it no network.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from grpclib import GRPCError, Status
from modal_proto import api_grpc, api_pb2, task_command_router_grpc
from modal_proto import task_command_router_pb2 as tcr

from tests.e2b_local.connect import ConnectError
from tests.e2b_local.sandboxes import Proc, Sandbox, SandboxRegistry

NO_EXPIRY = 10.0**9
#: The router's file descriptor enums (STDOUT 0, STDERR 1) -> the stream our processes record.
_FDS = {0: "stdout", 1: "stderr"}


def _log_unimplemented(cls: type) -> type:
    """Every RPC the class does not implement answers UNIMPLEMENTED and is logged."""

    def missing(name: str) -> Any:
        async def rpc(self: Any, stream: Any) -> None:
            print(f"modal local: unimplemented RPC {name}", file=sys.stderr, flush=True)
            raise GRPCError(Status.UNIMPLEMENTED, f"{name} is not implemented by the local Modal server")

        return rpc

    for name in sorted(getattr(cls, "__abstractmethods__", ())):
        setattr(cls, name, missing(name))
    cls.__abstractmethods__ = frozenset()  # type: ignore[attr-defined]
    return cls


def _jwt(**claims: Any) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}.local"


def _blocked(definition: api_pb2.Sandbox) -> bool:
    """``block_network=True``: the SDK sends it as a BLOCKED network access (and the old field)."""
    blocked = api_pb2.NetworkAccess.NetworkAccessType.BLOCKED
    return definition.block_network or definition.network_access.network_access_type == blocked


@dataclass
class Box:
    """A Modal sandbox: the shared sandbox layer, its entrypoint and its execs."""

    id: str
    task_id: str
    app_id: str
    sandbox: Sandbox
    tags: dict[str, str]
    timeout: float
    created: float = field(default_factory=time.time)
    entry: Proc | None = None
    execs: dict[str, Proc] = field(default_factory=dict)
    #: Bytes of stdin taken so far, per process (the entrypoint is ""): offsets make writes idempotent.
    stdin_taken: dict[str, int] = field(default_factory=dict)
    result: api_pb2.GenericResult | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def finish(self, status: int, exitcode: int = 0, exception: str = "") -> None:
        if self.result is None:
            self.result = api_pb2.GenericResult(status=status, exitcode=exitcode, exception=exception)
            self.finished.set()


class LocalModal:
    def __init__(self, root: str) -> None:
        self.registry = SandboxRegistry(root, envd_version="0")
        self.boxes: dict[str, Box] = {}
        self.by_task: dict[str, Box] = {}
        self.apps: dict[str, str] = {}
        self.router_url = ""

    def box(self, sandbox_id: str) -> Box:
        box = self.boxes.get(sandbox_id)
        if box is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {sandbox_id} not found")
        return box

    def task(self, task_id: str, *, reading: bool = False) -> Box:
        """The sandbox of a task. A finished one still serves what its processes wrote (Modal
        keeps a sandbox's output after it ends: a read that starts once the entrypoint has
        exited gets it all); only writes and new execs need it running."""
        box = self.by_task.get(task_id)
        if box is None or not reading and box.result is not None and box.sandbox.state == "killed":
            raise GRPCError(Status.NOT_FOUND, f"task {task_id} not found or finished")
        return box

    async def create(self, app_id: str, definition: api_pb2.Sandbox, env: dict[str, str], tags: dict[str, str]) -> Box:
        sandbox = Sandbox(
            registry=self.registry,
            template=definition.image_id or "im-local",
            timeout=NO_EXPIRY,
            metadata={},
            env_vars=env,
            internet=not _blocked(definition),
            auto_pause=False,
        )
        box = Box(
            id="sb-" + secrets.token_hex(12),  # not 22 characters: the SDK takes those for V1 ids
            task_id="ta-" + secrets.token_hex(12),
            app_id=app_id,
            sandbox=sandbox,
            tags=tags,
            timeout=float(definition.timeout_secs or 300),
        )
        self.boxes[box.id] = box
        self.by_task[box.task_id] = box
        args = list(definition.entrypoint_args) or ["sleep", "infinity"]
        box.entry = await self._spawn(box, args, {})
        asyncio.get_running_loop().create_task(self._watch(box))
        return box

    async def _spawn(self, box: Box, args: list[str], env: dict[str, str], workdir: str = "") -> Proc:
        spec: dict[str, Any] = {"cmd": "/bin/sh", "args": ["-c", 'exec "$@"', "sh", *args], "envs": env}
        if workdir:
            spec["cwd"] = workdir
        try:
            return await box.sandbox.start(
                {"process": spec, "stdin": True}, user="user", deadline_ms=None, keep_history=True
            )
        except ConnectError as err:
            raise GRPCError(Status.INVALID_ARGUMENT, err.message) from None

    async def _watch(self, box: Box) -> None:
        """The sandbox ends with its entrypoint, or at its timeout."""
        assert box.entry is not None
        try:
            code = await asyncio.wait_for(box.entry.popen.wait(), box.timeout)
        except asyncio.TimeoutError:
            await self.terminate(box, api_pb2.GenericResult.GENERIC_STATUS_TIMEOUT)
            return
        if box.result is None:
            ok = (
                api_pb2.GenericResult.GENERIC_STATUS_SUCCESS
                if code == 0
                else api_pb2.GenericResult.GENERIC_STATUS_FAILURE
            )
            await self.terminate(box, ok, exitcode=code)

    async def terminate(self, box: Box, status: int, exitcode: int = 0) -> None:
        box.finish(status, exitcode)
        if box.sandbox.state != "killed":
            await box.sandbox.destroy()

    async def close(self) -> None:
        for box in list(self.boxes.values()):
            await self.terminate(box, api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)


async def _follow(box: Box, proc: Proc, fd: int, offset: int) -> Any:
    """(starting offset, bytes) of ``proc``'s output on ``fd`` from ``offset``: what was written,
    then live until the process ends."""
    name = _FDS.get(fd, "stdout")
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    proc.subscribers.add(queue)  # with the snapshot below in one step: nothing missed or doubled
    try:
        written = b"".join(chunk for stream, chunk in proc.history or [] if stream == name)
        if offset < len(written):
            yield offset, written[offset:]
        position = max(offset, len(written))
        while proc.end is None and box.sandbox.state != "killed":
            try:
                kind, value = await asyncio.wait_for(queue.get(), 1.0)
            except asyncio.TimeoutError:
                continue
            if kind != "data":
                break
            stream, chunk = value
            if stream == name:
                yield position, chunk
                position += len(chunk)
    finally:
        proc.subscribers.discard(queue)


async def _take_stdin(box: Box, key: str, proc: Proc, offset: int, data: bytes, eof: bool) -> None:
    taken = box.stdin_taken.get(key, 0)
    fresh = data[max(0, taken - offset) :] if offset <= taken else data
    if fresh:
        try:
            await box.sandbox.send_input(proc, fresh)
        except ConnectError as err:
            raise GRPCError(Status.FAILED_PRECONDITION, err.message) from None
        box.stdin_taken[key] = max(taken, offset) + len(fresh)
    if eof:
        box.sandbox.close_stdin(proc)


@_log_unimplemented
class ControlPlane(api_grpc.ModalClientBase):
    def __init__(self, state: LocalModal) -> None:
        self.state = state

    async def AuthTokenGet(self, stream: Any) -> None:
        await stream.recv_message()
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=_jwt(exp=int(time.time()) + 3600)))

    async def AppGetOrCreate(self, stream: Any) -> None:
        req = await stream.recv_message()
        app_id = self.state.apps.setdefault(req.app_name, "ap-" + secrets.token_hex(11))
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=app_id))

    async def ImageFromId(self, stream: Any) -> None:
        req = await stream.recv_message()
        await stream.send_message(api_pb2.ImageFromIdResponse(image_id=req.image_id))

    async def SandboxCreateV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        env: dict[str, str] = {}
        for source in req.secret_sources:
            env.update(dict(source.env.contents))
        tags = {t.tag_name: t.tag_value for t in req.tags}
        box = await self.state.create(req.app_id, req.definition, env, tags)
        access = api_pb2.CommandRouterAccess(url=self.state.router_url, jwt=_jwt(exp=int(time.time()) + 3600))
        await stream.send_message(
            api_pb2.SandboxCreateV2Response(sandbox_id=box.id, task_id=box.task_id, command_router_access=access)
        )

    async def SandboxWaitV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.box(req.sandbox_id)
        if box.result is None and req.timeout > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(box.finished.wait(), min(req.timeout, 10.0))
        await stream.send_message(api_pb2.SandboxWaitResponse(result=box.result or api_pb2.GenericResult()))

    async def SandboxGetTaskIdV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.box(req.sandbox_id)
        await stream.send_message(api_pb2.SandboxGetTaskIdResponse(task_id=box.task_id, task_result=box.result))

    async def SandboxGetCommandRouterAccess(self, stream: Any) -> None:
        await stream.recv_message()
        jwt = _jwt(exp=int(time.time()) + 3600)
        await stream.send_message(api_pb2.SandboxGetCommandRouterAccessResponse(url=self.state.router_url, jwt=jwt))

    async def SandboxListV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        wanted = {t.tag_name: t.tag_value for t in req.tags}
        found = [
            api_pb2.SandboxInfo(
                id=box.id,
                app_id=box.app_id,
                created_at=box.created,
                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in box.tags.items()],
            )
            for box in self.state.boxes.values()
            if (req.include_finished or box.result is None)
            and (not req.app_id or box.app_id == req.app_id)
            and all(box.tags.get(k) == v for k, v in wanted.items())
            and (not req.before_timestamp or box.created < req.before_timestamp)
        ]
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=found))

    async def SandboxTagsGetV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.box(req.sandbox_id)
        tags = [api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in box.tags.items()]
        await stream.send_message(api_pb2.SandboxTagsGetResponse(tags=tags))

    async def SandboxTerminateV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        await self.state.terminate(self.state.box(req.sandbox_id), api_pb2.GenericResult.GENERIC_STATUS_TERMINATED)
        await stream.send_message(api_pb2.SandboxTerminateResponse())


@_log_unimplemented
class CommandRouter(task_command_router_grpc.TaskCommandRouterBase):
    def __init__(self, state: LocalModal) -> None:
        self.state = state

    def _exec(self, box: Box, exec_id: str) -> Proc:
        proc = box.execs.get(exec_id)
        if proc is None:
            raise GRPCError(Status.NOT_FOUND, f"exec {exec_id} not found")
        return proc

    async def SandboxStdioReadV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.task(req.task_id, reading=True)
        assert box.entry is not None
        async for start, data in _follow(box, box.entry, int(req.file_descriptor), int(req.offset)):
            await stream.send_message(tcr.SandboxStdioReadV2Response(data=data, starting_offset=start))

    async def SandboxStdinWriteV2(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.task(req.task_id)
        assert box.entry is not None
        await _take_stdin(box, "", box.entry, int(req.offset), req.data, req.eof)
        await stream.send_message(tcr.SandboxStdinWriteV2Response())

    async def TaskExecStart(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.task(req.task_id)
        box.execs[req.exec_id] = await self._start(box, req)
        await stream.send_message(tcr.TaskExecStartResponse())

    async def _start(self, box: Box, req: Any) -> Proc:
        env = dict(req.env)
        for source in req.secret_sources:
            env.update(dict(source.env.contents))
        return await self.state._spawn(box, list(req.command_args), env, req.workdir)

    async def TaskExecStdinWrite(self, stream: Any) -> None:
        req = await stream.recv_message()
        box = self.state.task(req.task_id)
        await _take_stdin(box, req.exec_id, self._exec(box, req.exec_id), int(req.offset), req.data, req.eof)
        await stream.send_message(tcr.TaskExecStdinWriteResponse())


async def serve(host: str, port: int, root: str) -> None:
    """Run until SIGINT/SIGTERM; prints one line with the server's URL once listening."""
    import signal

    from grpclib.server import Server

    state = LocalModal(root)
    server = Server([ControlPlane(state), CommandRouter(state)])
    await server.start(host, port)
    bound = server._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    # "localhost": the client takes a plain-http command router only from a local host.
    state.router_url = f"http://localhost:{bound}"
    print(f"Modal local server listening on {state.router_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await state.close()
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2.0)
