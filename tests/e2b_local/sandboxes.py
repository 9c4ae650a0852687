"""Sandboxes of the local E2B server: a directory tree and a table of jailed processes.

One sandbox is a home (``/home/user``) and a ``/tmp`` on the host, shared by every process
started in it. Each process runs ``/bin/bash -l -c CMD`` (as envd does) inside its own
bubblewrap jail: read-only ``/usr`` and ``/etc``, the sandbox's home and tmp bound
read-write, fresh ``/proc`` and ``/dev``, its own user, pid, ipc and uts namespaces, and no
network unless the sandbox was created with internet access. The code inside is uid 1000
("user"; uid 0 when the request asks for ``root``) of a user namespace; on the host it is
the server's own uid, or uid 65534 when the server runs as root (bubblewrap is started
with that uid, so nothing in a sandbox is ever host root).

Lifecycle, as envd and the control plane behave (research note sections 5 and 6):

* pause: every open stream of the sandbox is aborted, every subscriber dropped, every
  process group SIGSTOPped and the pipe readers gated; the process table is kept.
* resume: SIGCONT, readers un-gated; output read before a client re-attaches is dropped.
* kill: SIGKILL every group, abort the streams, forget the sandbox, remove its files.
* Output with no subscriber is read and discarded; an exited process's ``end`` event is
  kept 30 s for a late ``Connect``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import signal
import string
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from codemode.runtimes.jail.bwrap import find_bwrap

from .connect import ConnectError

HOME = "/home/user"
ENVD_USER_UID = 1000
#: envd keeps an exited process's end event this long (``terminatedRetentionTTL``).
RETENTION_SECONDS = 30.0
CHUNK = 32 * 1024
_ID_ALPHABET = string.ascii_lowercase + string.digits
_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Host uid that runs the jails when the server itself is root.
UNPRIVILEGED_UID = 65534


def new_sandbox_id() -> str:
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(20))


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat().replace("+00:00", "Z")


@dataclass
class Proc:
    """One process of a sandbox (``pid`` is the sandbox's own number, as in the VM)."""

    pid: int
    config: dict[str, Any]
    tag: str | None
    popen: asyncio.subprocess.Process
    subscribers: set[asyncio.Queue[tuple[str, Any]]] = field(default_factory=set)
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)
    end: dict[str, Any] | None = None
    stdin_open: bool = False
    #: Everything it wrote, in order, for servers whose log streams replay (the Blaxel fake).
    history: list[tuple[str, bytes]] | None = None
    started: float = field(default_factory=time.time)

    def publish(self, event: tuple[str, Any]) -> None:
        for queue in list(self.subscribers):
            queue.put_nowait(event)

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)


class Sandbox:
    def __init__(
        self,
        *,
        registry: SandboxRegistry,
        template: str,
        timeout: float,
        metadata: dict[str, str],
        env_vars: dict[str, str],
        internet: bool,
        auto_pause: bool,
    ) -> None:
        self.registry = registry
        self.id = new_sandbox_id()
        self.template = template
        self.metadata = metadata
        self.env_vars = env_vars
        self.internet = internet
        self.auto_pause = auto_pause
        self.token = secrets.token_urlsafe(24)
        self.state = "running"
        self.started_at = time.time()
        self.end_at = self.started_at + timeout
        self.root = os.path.join(registry.root, self.id)
        self.home = os.path.join(self.root, "home")
        self.tmp = os.path.join(self.root, "tmp")
        for path in (self.root, self.home, self.tmp):
            os.makedirs(path, mode=0o755, exist_ok=True)
        os.chmod(self.tmp, 0o1777)
        registry.own(self.root, self.home, self.tmp)
        self.procs: dict[int, Proc] = {}
        self.retained: dict[int, tuple[dict[str, Any], float]] = {}
        #: Transports of the open streams, closed when the sandbox pauses or dies.
        self.streams: set[asyncio.BaseTransport] = set()
        self.running = asyncio.Event()
        self.running.set()
        self._next_pid = 1000
        self._expiry: asyncio.TimerHandle | None = None
        self.schedule_expiry()

    # -- lifecycle -------------------------------------------------------------------------

    def schedule_expiry(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = None
        if self.state == "running":
            delay = max(0.0, self.end_at - time.time())
            loop = asyncio.get_running_loop()
            self._expiry = loop.call_later(delay, lambda: asyncio.ensure_future(self._expire()))

    async def _expire(self) -> None:
        if self.state != "running":
            return
        if self.auto_pause:
            self.pause()
        else:
            await self.registry.kill(self.id)

    def abort_streams(self) -> None:
        """Network connections to the sandbox drop (pause, kill)."""
        for transport in list(self.streams):
            transport.close()
        self.streams.clear()
        for proc in self.procs.values():
            proc.subscribers.clear()

    def pause(self, *, keep_memory: bool = True) -> None:
        self.state = "paused"
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        self.running.clear()
        self.abort_streams()
        for proc in self.procs.values():
            proc.signal_group(signal.SIGKILL if not keep_memory else signal.SIGSTOP)
        if not keep_memory:
            self.procs.clear()
            self.retained.clear()

    def resume(self, timeout: float) -> None:
        for proc in self.procs.values():
            proc.signal_group(signal.SIGCONT)
        self.state = "running"
        self.end_at = time.time() + timeout
        self.running.set()
        self.schedule_expiry()

    async def destroy(self) -> None:
        self.state = "killed"
        if self._expiry is not None:
            self._expiry.cancel()
        self.abort_streams()
        self.running.set()  # let gated readers see EOF
        procs = list(self.procs.values())
        for proc in procs:
            proc.signal_group(signal.SIGKILL)
        for proc in procs:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.popen.wait(), 5.0)
            for task in proc.tasks:
                task.cancel()
        self.procs.clear()
        self.retained.clear()
        await asyncio.to_thread(shutil.rmtree, self.root, True)

    # -- info ------------------------------------------------------------------------------

    def detail(self, envd_version: str) -> dict[str, Any]:
        return {
            "templateID": self.template,
            "alias": self.template,
            "sandboxID": self.id,
            "clientID": "local",
            "startedAt": rfc3339(self.started_at),
            "endAt": rfc3339(self.end_at),
            "envdVersion": envd_version,
            "envdAccessToken": self.token,
            "cpuCount": os.cpu_count() or 1,
            "memoryMB": 512,
            "diskSizeMB": 1024,
            "state": self.state,
            "metadata": self.metadata,
            "allowInternetAccess": self.internet,
        }

    # -- files -------------------------------------------------------------------------------

    def host_path(self, path: str, *, for_write: bool) -> tuple[str, str]:
        """(host path, sandbox path) for an envd path: ``~``, relative (joins home) or
        absolute. Only the home and ``/tmp`` exist on the host per sandbox; other absolute
        paths read the host's (read-only) system files and cannot be written."""
        if path in ("", "~"):
            inside = HOME
        elif path.startswith("~/"):
            inside = HOME + path[1:]
        elif not path.startswith("/"):
            inside = f"{HOME}/{path}"
        else:
            inside = path
        inside = os.path.normpath(inside)
        for prefix, base in ((HOME, self.home), ("/tmp", self.tmp)):
            if inside == prefix or inside.startswith(prefix + "/"):
                return base + inside[len(prefix) :], inside
        if for_write:
            raise web.HTTPForbidden(
                text=f'{{"code":403,"message":"cannot write {inside}: only {HOME} and /tmp are writable here"}}',
                content_type="application/json",
            )
        return inside, inside

    # -- processes ---------------------------------------------------------------------------

    def lookup(self, selector: dict[str, Any]) -> Proc | None:
        if "pid" in selector:
            return self.procs.get(int(selector["pid"]))
        tag = selector.get("tag")
        return next((p for p in self.procs.values() if tag is not None and p.tag == tag), None)

    def retained_end(self, selector: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        now = time.monotonic()
        for pid, (_end, expires) in list(self.retained.items()):
            if expires < now:
                del self.retained[pid]
        if "pid" in selector and int(selector["pid"]) in self.retained:
            pid = int(selector["pid"])
            return pid, self.retained[pid][0]
        return None

    async def start(
        self, request: dict[str, Any], *, user: str, deadline_ms: int | None, keep_history: bool = False
    ) -> Proc:
        spec = request.get("process") or {}
        cmd = spec.get("cmd")
        if not cmd:
            raise ConnectError("invalid_argument", "process.cmd is required")
        args = list(spec.get("args") or [])
        envs = dict(spec.get("envs") or {})
        cwd_host, cwd = self.host_path(spec.get("cwd") or "", for_write=False)
        if not os.path.isdir(cwd_host):
            raise ConnectError("invalid_argument", f"cwd '{cwd}' does not exist")
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
        if user == "root":
            env.update(HOME="/root", USER="root", LOGNAME="root")
        else:
            env.update(HOME=HOME, USER="user", LOGNAME="user")
        env.update(self.env_vars)
        env.update(envs)
        stdin = request.get("stdin", True) is not False
        argv = self.registry.jail_argv(self, uid=0 if user == "root" else ENVD_USER_UID, cwd=cwd, env=env)
        argv += ["--", cmd, *args]
        try:
            popen = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                env={"PATH": "/usr/bin:/bin"},
                **self.registry.spawn_identity(),
            )
        except OSError as exc:
            raise ConnectError("invalid_argument", f"cannot start the process: {exc}") from exc
        pid = self._next_pid
        self._next_pid += 1
        config = {"cmd": cmd, "args": args, "envs": envs}
        if spec.get("cwd"):
            config["cwd"] = spec["cwd"]
        proc = Proc(pid=pid, config=config, tag=request.get("tag"), popen=popen, stdin_open=stdin)
        if keep_history:
            proc.history = []
        self.procs[pid] = proc
        readers = [
            asyncio.create_task(self._read(proc, popen.stdout, "stdout")),
            asyncio.create_task(self._read(proc, popen.stderr, "stderr")),
        ]
        proc.tasks += readers
        proc.tasks.append(asyncio.create_task(self._reap(proc, readers)))
        if deadline_ms:
            proc.tasks.append(asyncio.create_task(self._deadline(proc, deadline_ms / 1000)))
        return proc

    async def _read(self, proc: Proc, pipe: asyncio.StreamReader | None, name: str) -> None:
        assert pipe is not None
        while True:
            await self.running.wait()  # a paused sandbox reads nothing: envd is frozen too
            chunk = await pipe.read(CHUNK)
            if not chunk:
                return
            if proc.history is not None:
                proc.history.append((name, chunk))
            if proc.subscribers:  # nobody attached: envd discards the output
                proc.publish(("data", (name, chunk)))

    async def _reap(self, proc: Proc, readers: list[asyncio.Task[None]]) -> None:
        code = await proc.popen.wait()
        await asyncio.gather(*readers, return_exceptions=True)
        if code < 0:
            name = {signal.SIGKILL: "killed", signal.SIGTERM: "terminated"}.get(-code, f"signal {-code}")
            end = {"exitCode": -1, "exited": False, "status": f"signal: {name}", "error": f"signal: {name}"}
        else:
            end = {"exitCode": code, "exited": True, "status": f"exit status {code}"}
            if code:
                end["error"] = f"exit status {code}"
        proc.end = end
        self.procs.pop(proc.pid, None)
        self.retained[proc.pid] = (end, time.monotonic() + RETENTION_SECONDS)
        proc.publish(("end", end))

    async def _deadline(self, proc: Proc, seconds: float) -> None:
        await asyncio.sleep(seconds)
        if proc.end is None:
            proc.signal_group(signal.SIGKILL)

    async def send_input(self, proc: Proc, data: bytes) -> None:
        stdin = proc.popen.stdin
        if not proc.stdin_open or stdin is None or stdin.is_closing():
            raise ConnectError("internal", "error writing to stdin: stdin not enabled or closed")
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectError("internal", f"error writing to stdin: {exc}") from exc

    def close_stdin(self, proc: Proc) -> None:
        proc.stdin_open = False
        if proc.popen.stdin is not None and not proc.popen.stdin.is_closing():
            proc.popen.stdin.close()


class SandboxRegistry:
    """Every sandbox of the server, and how their processes are jailed."""

    def __init__(self, root: str, *, envd_version: str) -> None:
        self.root = root
        self.envd_version = envd_version
        self.sandboxes: dict[str, Sandbox] = {}
        self.bwrap = find_bwrap()
        self.as_root = os.geteuid() == 0
        os.makedirs(root, mode=0o755, exist_ok=True)
        os.chmod(root, 0o755)
        # E2B's user is "user" (uid 1000): give the jail a passwd naming it.
        self.passwd = os.path.join(root, "passwd")
        self.group = os.path.join(root, "group")
        with open(self.passwd, "w") as f:
            f.write("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000::/home/user:/bin/bash\n")
            f.write("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        with open(self.group, "w") as f:
            f.write("root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n")

    def own(self, *paths: str) -> None:
        """Files of a sandbox belong to the host uid its processes run as."""
        if self.as_root:
            for path in paths:
                os.chown(path, UNPRIVILEGED_UID, UNPRIVILEGED_UID)

    def spawn_identity(self) -> dict[str, Any]:
        if self.as_root:
            return {"user": UNPRIVILEGED_UID, "group": UNPRIVILEGED_UID, "extra_groups": []}
        return {}

    def jail_argv(self, sbx: Sandbox, *, uid: int, cwd: str, env: dict[str, str]) -> list[str]:
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--uid", str(uid), "--gid", str(uid)]
        if sbx.internet:
            argv.append("--share-net")
        argv += ["--die-with-parent", "--hostname", f"e2b-{sbx.id[:8]}", "--ro-bind", "/usr", "/usr"]
        for d in _SYSTEM_DIRS:
            if os.path.islink(d):
                argv += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                argv += ["--ro-bind", d, d]
        argv += [
            "--ro-bind",
            "/etc",
            "/etc",
            "--ro-bind",
            self.passwd,
            "/etc/passwd",
            "--ro-bind",
            self.group,
            "/etc/group",
        ]
        argv += ["--proc", "/proc", "--dev", "/dev", "--bind", sbx.home, HOME, "--bind", sbx.tmp, "/tmp"]
        if uid == 0:
            argv += ["--dir", "/root"]
        argv += ["--chdir", cwd, "--clearenv"]
        for key, value in env.items():
            argv += ["--setenv", key, value]
        return argv

    def get(self, sandbox_id: str) -> Sandbox | None:
        return self.sandboxes.get(sandbox_id)

    def create(self, body: dict[str, Any]) -> Sandbox:
        internet = body.get("allow_internet_access")
        sbx = Sandbox(
            registry=self,
            template=str(body.get("templateID") or "base"),
            timeout=float(body.get("timeout") or 300),
            metadata={str(k): str(v) for k, v in (body.get("metadata") or {}).items()},
            env_vars={str(k): str(v) for k, v in (body.get("envVars") or {}).items()},
            internet=True if internet is None else bool(internet),
            auto_pause=bool(body.get("autoPause")),
        )
        self.sandboxes[sbx.id] = sbx
        return sbx

    async def kill(self, sandbox_id: str) -> bool:
        sbx = self.sandboxes.pop(sandbox_id, None)
        if sbx is None:
            return False
        await sbx.destroy()
        return True

    async def close(self) -> None:
        for sandbox_id in list(self.sandboxes):
            await self.kill(sandbox_id)
