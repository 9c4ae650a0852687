"""``DockerRuntime``: the code runs in a fresh container of any image with ``python3``.

Any engine that serves the Docker API works (Docker, or podman's ``podman system
service``), named by ``DOCKER_HOST`` or ``base_url``; any image whose ``python3`` (on its
PATH, 3.9 or newer) runs our standard-library runner (one zip, ``runtimes/runner/package.py``: the
python and e2b runtimes' runner). Nothing is baked into the image: the container's command
is a few lines of loader (``LOADER``) that make a FIFO in the container's private ``/tmp``,
read the runner's zip from it, and run it; the runner then reads its bootstrap (the code,
its inputs, the tool stubs) and its answers from the same FIFO. A worker writes into the FIFO
through a relay it execs into the container (``RELAY``), one per attachment: not through the
container's stdin, which podman closes for good when the first client attached to it goes
away (a worker that dies), so no other worker could answer. The runner's messages and the
code's output come back through the engine's attach stream (Docker's multiplexed frames;
stdout and stderr arrive unordered, so the runner marks its output,
``runtimes/transports/command.py``). No credential, no host address and no host environment
variable enters the container. The code can write into the FIFO too (same uid): it can only
confuse itself, as with any protocol input; the host validates everything it receives.

Hardened defaults: no network (``network_mode="none"``), a read-only root filesystem with
size-capped tmpfs for ``/tmp`` and the work directory ``/sandbox``, every capability
dropped, ``no-new-privileges``, uid 65534, an init process, ``pids_limit``, a memory limit
(the code's ``max_memory_bytes`` as ``RLIMIT_DATA`` inside, and as the cgroup's limit plus
the interpreter's headroom), one CPU, no log driver (the code's output is not kept by the
engine). Every container carries the label ``codemode=1`` and its execution and step
(``runtimes/runner/owner.py``); the sweep removes the ones no open execution names.

Checkpoints are tier 2, like E2B's: ``dump()`` names the container, the pid of its init
(the runner's process tree) and where the runner is (calls made, calls waiting). Any
worker that reaches the same engine ``restore``s it: inspect, unpause, attach again and ask
the runner where it is (the protocol's ``sync``); output written while nobody was attached
is lost, so a runner that moved on is not trusted. A container that is gone, exited or out
of step makes ``restore`` return None (after removing what is left): the caller replays
the journal in a fresh container. ``suspend`` pauses the container (cgroup freezer: no CPU
while a run waits for a person); ``discard`` removes it.

Options (``codemode.runtimes.types.SandboxOptions``): ``mounts`` are bind-mounted read-only;
``network`` is ``"none"`` (default), ``"full"`` (the engine's default network, or
``network_name``) or ``"ratchet"``: full until the first result of a tool that handles
private data, then disconnected for good before the code sees it
(``CodeExecution.cut_network``).

Requires PyPI ``docker``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

try:
    import docker
    from docker.errors import APIError, DockerException, ImageNotFound, NotFound
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the docker runtime needs the Docker SDK: pip install 'durable-codemode[docker]' (or pip install 'docker>=7')"
    ) from exc

from .constraints import CodeConstraints
from .errors import SandboxError
from .runner.driver import RunnerExit
from .runner.fifo import LOADER, RELAY
from .runner.mounts import check_mounts
from .runner.provider import OwnSandbox, RunnerProcess, SandboxSpec, Stdio
from .runner.sandbox_run import RUNNER_ZIP
from .runner.sandbox_runtime import SandboxRuntime
from .types import CheckpointTier, ExecutionLimits, RuntimeCapabilities, SandboxOptions

log = logging.getLogger(__name__)

#: Every container this runtime makes carries these labels (``sweep`` finds them by the first).
LABEL = "codemode"
LABEL_RUNTIME = "codemode.runtime"
LABEL_CREATED = "codemode.created"

SANDBOX_UID = "65534:65534"
WORKDIR = "/sandbox"

DOCKER_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in a container: the standard library and the packages installed in the image "
        "import normally; the root filesystem is read-only, /tmp and the working directory are private and "
        "small; there is no network unless the execution asks for it. Randomness is seeded per execution; call "
        "a tool when you need the real current time."
    )
)

_FRAME = struct.Struct(">BxxxL")


class DockerSettingsError(ValueError):
    """The runtime cannot be used as configured (no image, no engine): nothing was started."""


# -- the attach stream ----------------------------------------------------------------------


class _Connection:
    """One hijacked connection to the engine: a container's attach stream (Docker's
    multiplexed frames in: a stream byte, three zero bytes, a big-endian length) or an exec's
    stdin (raw bytes out).

    On a plain socket (a unix socket, TCP without TLS) it runs on the event loop; any other
    transport the SDK hands back (TLS, SSH) is read by a thread."""

    def __init__(
        self,
        sock: Any,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
    ) -> None:
        self.sdk_socket = sock  # keeps the SDK's response (and so the connection) alive
        self.raw = getattr(sock, "_sock", sock)
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self._decoders = {
            1: codecs.getincrementaldecoder("utf-8")("replace"),
            2: codecs.getincrementaldecoder("utf-8")("replace"),
        }
        self.closed = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None

    async def open(self) -> None:
        if type(self.raw) is socket.socket:
            reader, self._writer = await asyncio.open_connection(sock=self.raw, limit=1 << 20)
            self._task = asyncio.create_task(self._read_async(reader))
        else:
            loop = asyncio.get_running_loop()
            self._thread = threading.Thread(target=self._read_blocking, args=(loop,), daemon=True)
            self._thread.start()

    def _deliver(self, stream: int, data: bytes) -> None:
        decoder = self._decoders.get(stream)
        deliver = self.on_stdout if stream == 1 else self.on_stderr
        if decoder is None or deliver is None:
            return
        text = decoder.decode(data)
        if text:
            deliver(text)

    async def _read_async(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                head = await reader.readexactly(_FRAME.size)
                stream, size = _FRAME.unpack(head)
                self._deliver(stream, await reader.readexactly(size) if size else b"")
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.closed.set()

    def _read_blocking(self, loop: asyncio.AbstractEventLoop) -> None:
        recv = getattr(self.raw, "recv", None) or self.raw.read
        buf = b""
        try:
            while True:
                chunk = recv(1 << 16)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= _FRAME.size:
                    stream, size = _FRAME.unpack_from(buf)
                    if len(buf) < _FRAME.size + size:
                        break
                    data, buf = buf[_FRAME.size : _FRAME.size + size], buf[_FRAME.size + size :]
                    loop.call_soon_threadsafe(self._deliver, stream, data)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop closed first
                loop.call_soon_threadsafe(self.closed.set)

    async def write(self, data: bytes) -> None:
        if self._writer is not None:
            self._writer.write(data)
            await self._writer.drain()
        else:
            await asyncio.to_thread(self.raw.sendall, data)

    async def close(self) -> None:
        # shutdown() ends the connection even while the SDK's file object still references
        # the socket (close() alone would then leave it open): the engine must see it go.
        with contextlib.suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        with contextlib.suppress(Exception):
            self.raw.close()
        with contextlib.suppress(Exception):
            self.sdk_socket.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


# -- the runner, attached ----------------------------------------------------------------------


class _DockerProcess(RunnerProcess):
    """The runner as the container's main process: its output through the container's
    attach stream, its input through a relay exec'd into the container."""

    def __init__(self, runtime: DockerRuntime, container_id: str, output: _Connection, relay: _Connection) -> None:
        self.runtime = runtime
        self.container_id = container_id
        self.output = output
        self.relay = relay

    async def write(self, data: bytes) -> None:
        await self.relay.write(data)

    async def wait(self) -> RunnerExit:
        await self.output.closed.wait()
        state = await self.runtime.final_state(self.container_id)
        if state is None:
            return RunnerExit(lost="the attach stream ended while the container still runs")
        if state.get("Status") == "removed":
            return RunnerExit(status=137, removed=True, detail=str(state.get("Error")))
        code = int(state.get("ExitCode") or 0)
        return RunnerExit(
            status=code if code <= 128 else None,
            signal=code - 128 if code > 128 else None,
            oom=bool(state.get("OOMKilled")),
            detail=str(state.get("Error") or ""),
        )

    async def kill(self) -> None:
        await self.runtime.call(self.runtime.api.kill, self.container_id)

    async def close(self) -> None:
        for connection in (self.relay, self.output):
            await connection.close()


class DockerRuntime(SandboxRuntime):
    """Real CPython in a fresh container per execution; checkpoints are the (paused)
    container itself.

    :param image: the image to run (default ``CODEMODE_DOCKER_IMAGE``); any image whose
        ``python`` (default ``python3``) is CPython 3.9 or newer.
    :param base_url: the engine (default ``DOCKER_HOST``, else the SDK's default socket).
    :param cpus: CPUs the container may use (``nano_cpus``).
    :param max_processes: the container's pids limit (processes and threads).
    :param tmpfs_bytes: size of each private tmpfs (``/tmp``, ``/sandbox``).
    :param memory_headroom: bytes the container may use beyond the code's
        ``max_memory_bytes`` (``RLIMIT_DATA`` inside): the interpreter, the runner, the init.
    :param network_name: the network ``network="full"`` and ``"ratchet"`` connect to
        (default: the engine's default bridge).
    :param user: ``uid:gid`` the code runs as (default the unprivileged 65534).
    :param init: run an init process as pid 1 (Docker's ``--init``; podman's catatonit).
    :param labels: extra labels on every container (``codemode=1`` is always set).
    :param sync_timeout: seconds a re-attached runner has to say where it is.
    :param api_version: the Docker API version to speak (``"auto"`` asks the engine).
    :param image_packages: packages the image has that the code may import (``pandas``...),
        named in the prompt so a model knows it can use them.
    """

    name = "docker"
    constraints = DOCKER_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="docker",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=True,
        network=False,
        checkpoint_tier=CheckpointTier.SESSION,
        type_checking=False,
        startup_latency_ms=400.0,
        mounts=True,
        network_policies=("none", "full", "ratchet"),
    )
    handle_keys = ("container_id", "pid")
    parks_as = "paused"
    #: podman takes a while to remove a container: not on the step's critical path.
    destroy_in_background = True

    def __init__(
        self,
        *,
        image: str | None = None,
        base_url: str | None = None,
        python: str = "python3",
        cpus: float = 1.0,
        max_processes: int = 64,
        tmpfs_bytes: int = 64 * 1024 * 1024,
        memory_headroom: int = 64 * 1024 * 1024,
        network_name: str | None = None,
        user: str = SANDBOX_UID,
        init: bool = True,
        labels: Mapping[str, str] | None = None,
        startup_timeout: float = 60.0,
        kill_grace: float = 1.0,
        sync_timeout: float = 10.0,
        timeout: float = 60.0,
        api_version: str = "1.41",
        image_packages: Sequence[str] = (),
    ) -> None:
        super().__init__()
        image = image or os.environ.get("CODEMODE_DOCKER_IMAGE")
        if not image:
            raise DockerSettingsError(
                "DockerRuntime needs an image with python3 (3.9 or newer): pass image=... or set "
                "CODEMODE_DOCKER_IMAGE (the CLI: --image)"
            )
        self.image = image
        self.base_url = base_url or os.environ.get("DOCKER_HOST")
        try:
            # A fixed API version: negotiating it asks the engine for /version, which podman
            # answers in 0.6-1.6 s here. 1.41 is what podman serves; Docker serves it too.
            self.client = (
                docker.DockerClient(base_url=self.base_url, timeout=int(timeout), version=api_version)
                if self.base_url
                else docker.from_env(timeout=int(timeout), version=api_version)
            )
        except DockerException as exc:
            raise DockerSettingsError(
                f"cannot reach a Docker engine ({self.base_url or 'the default socket'}): {exc}; set DOCKER_HOST "
                "(for podman: `podman system service --time=0 unix:///run/podman.sock` and "
                "DOCKER_HOST=unix:///run/podman.sock)"
            ) from exc
        self.api = self.client.api
        self.python = python
        self.cpus = cpus
        self.max_processes = max_processes
        self.tmpfs_bytes = tmpfs_bytes
        self.memory_headroom = memory_headroom
        self.network_name = network_name
        self.user = user
        self.init = init
        self.labels = {LABEL: "1", LABEL_RUNTIME: "docker", **dict(labels or {})}
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.sync_timeout = sync_timeout
        if image_packages:
            extra = f" The image has these packages installed: {', '.join(image_packages)}."
            self.constraints = DOCKER_CONSTRAINTS.model_copy(
                update={"additional_instructions": DOCKER_CONSTRAINTS.additional_instructions + extra}
            )

    # -- engine calls -------------------------------------------------------------------

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """A blocking SDK call in a thread; the engine's errors as ``SandboxError``."""
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ImageNotFound as exc:
            raise SandboxError(f"the image {self.image!r} is not on the Docker engine: {exc.explanation}") from exc
        except (APIError, DockerException, OSError) as exc:
            raise SandboxError(f"the Docker engine refused {getattr(fn, '__name__', fn)}: {exc}") from exc

    async def inspect(self, container_id: str) -> dict[str, Any] | None:
        """The container's description, None when it is gone."""
        try:
            return await asyncio.to_thread(self.api.inspect_container, container_id)
        except NotFound:
            return None
        except (APIError, DockerException, OSError) as exc:
            raise SandboxError(f"cannot inspect container {container_id[:12]}: {exc}") from exc

    async def final_state(self, container_id: str, wait: float = 2.0) -> dict[str, Any] | None:
        """The container's State once it stopped (its stream ended), or None when it still
        runs after ``wait`` seconds (the stream dropped, not the process). A container that
        is gone counts as exited with no status."""
        deadline = time.monotonic() + wait
        while True:
            try:
                info = await self.inspect(container_id)
            except SandboxError:
                return None
            if info is None:
                return {"Status": "removed", "ExitCode": 137, "Error": "the container was removed"}
            state = info.get("State", {})
            if state.get("Status") not in ("running", "paused", "stopping"):
                return state
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)

    def memory_limit(self, limits: ExecutionLimits) -> int:
        return limits.max_memory_bytes + self.memory_headroom

    async def create_container(
        self, limits: ExecutionLimits, options: SandboxOptions, hash_seed: int, labels: Mapping[str, str] | None = None
    ) -> str:
        """Create (not start) a container for one execution, hardened, carrying ``labels``
        (its execution and step); its id."""
        memory = self.memory_limit(limits)
        tmpfs_opts = f"rw,nosuid,nodev,size={self.tmpfs_bytes},mode=1777"
        network = "none" if options.network == "none" else (self.network_name or "bridge")
        binds = {src: {"bind": dst, "mode": "ro"} for src, dst in options.mounts.items()}
        host_config = self.api.create_host_config(
            read_only=True,
            tmpfs={"/tmp": tmpfs_opts, WORKDIR: tmpfs_opts},
            binds=binds or None,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=memory,
            memswap_limit=memory,
            nano_cpus=int(self.cpus * 1e9),
            pids_limit=self.max_processes,
            network_mode=network,
            init=self.init,
            ipc_mode="private",
            log_config=docker.types.LogConfig(type="none"),
        )
        env = {
            "HOME": WORKDIR,
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": str(hash_seed),
            "PYTHONDONTWRITEBYTECODE": "1",
            "MALLOC_ARENA_MAX": "2",
            # numpy's BLAS starts a thread per CPU of the host, not of the container.
            "OPENBLAS_NUM_THREADS": str(max(1, int(self.cpus))),
            "OMP_NUM_THREADS": str(max(1, int(self.cpus))),
        }
        created = await self.call(
            self.api.create_container,
            self.image,
            command=[self.python, "-s", "-c", LOADER],
            user=self.user,
            environment=env,
            working_dir=WORKDIR,
            hostname="sandbox",
            labels={**(labels or {}), **self.labels, LABEL_CREATED: str(int(time.time()))},
            host_config=host_config,
        )
        return str(created["Id"])

    async def remove_container(self, container_id: str) -> bool:
        """Remove a container whatever its state; False when it was already gone. A container
        caught exiting ("state improper" from podman) is tried again a few times."""
        for attempt in range(6):
            try:
                await asyncio.to_thread(self.api.remove_container, container_id, force=True)
                return True
            except NotFound:
                return False
            except APIError as exc:
                if exc.status_code == 409 and "already in progress" in str(exc):
                    return True
                if attempt < 5 and exc.is_server_error():
                    await asyncio.sleep(0.1 * (attempt + 1))
                    continue
                raise SandboxError(f"cannot remove container {container_id[:12]}: {exc}") from exc
            except (DockerException, OSError) as exc:
                raise SandboxError(f"cannot remove container {container_id[:12]}: {exc}") from exc
        return True

    async def disconnect_all(self, container_id: str) -> None:
        """Disconnect the container from every network and verify none is left."""
        info = await self.inspect(container_id)
        if info is None:
            raise SandboxError(f"container {container_id[:12]} is gone: cannot cut its network")
        for name in list((info.get("NetworkSettings") or {}).get("Networks") or {}):
            await self.call(self.api.disconnect_container_from_network, container_id, name, force=True)
        after = await self.inspect(container_id)
        left = list(((after or {}).get("NetworkSettings") or {}).get("Networks") or {})
        if after is None or left:
            raise SandboxError(f"container {container_id[:12]} is still on networks {left} after disconnecting")

    def check_options(self, options: SandboxOptions | None) -> SandboxOptions:
        """What the capabilities refuse, and mounts the engine cannot give (see ``check_mounts``)."""
        options = super().check_options(options)
        check_mounts(options.mounts, reserved=(WORKDIR,))
        return options

    def describe(self, handle: dict[str, Any]) -> str:
        return f"container {str(handle.get('container_id', '?'))[:12]}"

    def memory_note(self, limits: ExecutionLimits) -> str:
        return f" (its limit is {self.memory_limit(limits) >> 20} MiB)"

    # -- session operations -------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> tuple[dict[str, Any], Any]:
        container_id = await self.create_container(spec.limits, spec.options, spec.hash_seed, spec.labels)
        handle = {"container_id": container_id}
        try:
            await self.call(self.api.start, container_id)
        except BaseException:
            self.free(handle)
            raise
        return handle, None

    async def start_runner(
        self, handle: dict[str, Any], sandbox: Any, spec: SandboxSpec, stdio: Stdio
    ) -> RunnerProcess:
        process = await self._attach(handle["container_id"], stdio)
        await process.write(b"%d\n" % len(RUNNER_ZIP) + RUNNER_ZIP)  # the loader reads it first
        handle["pid"] = int((await self.inspect(handle["container_id"]) or {}).get("State", {}).get("Pid") or 0)
        return process

    async def _attach(self, container_id: str, stdio: Stdio) -> _DockerProcess:
        """Connect to the container: its output (the runner's protocol on stdout, the code's
        output on stderr) through the attach stream, and the runner's input through a relay
        process exec'd into it."""
        params = {"stdout": 1, "stderr": 1, "stream": 1}
        output = _Connection(
            await self.call(self.api.attach_socket, container_id, params=params), stdio.on_stdout, stdio.on_stderr
        )
        await output.open()
        try:
            relay_argv = [self.python, "-s", "-c", RELAY]
            exec_id = (
                await self.call(self.api.exec_create, container_id, relay_argv, stdin=True, stdout=False, stderr=False)
            )["Id"]
            relay = _Connection(await self.call(self.api.exec_start, exec_id, socket=True))
            await relay.open()
        except BaseException:
            await output.close()
            raise
        return _DockerProcess(self, container_id, output, relay)

    async def reattach(self, handle: dict[str, Any], stdio: Stdio) -> RunnerProcess | None:
        container_id = handle["container_id"]
        info = await self.inspect(container_id)
        if info is None:
            return None
        state = info.get("State", {})
        status = state.get("Status")
        if status == "paused":
            await self.call(self.api.unpause, container_id)
        elif status != "running":
            return None
        if handle.get("pid") and int(state.get("Pid") or 0) != int(handle["pid"]):
            return None  # another process tree than the one the checkpoint names
        return await self._attach(container_id, stdio)

    async def pause(self, handle: dict[str, Any]) -> None:
        """Freeze the container (cgroup freezer: no CPU while a run waits for a person)."""
        container_id = handle["container_id"]
        try:
            await asyncio.to_thread(self.api.pause, container_id)
        except NotFound:
            pass  # gone: the next step replays
        except APIError as exc:
            if "paused" in str(exc).lower() or "not running" in str(exc).lower():
                return  # already paused, or exited: the next step replays
            raise SandboxError(f"cannot pause container {container_id[:12]}: {exc}") from exc
        except (DockerException, OSError) as exc:
            raise SandboxError(f"cannot pause container {container_id[:12]}: {exc}") from exc

    async def destroy(self, handle: dict[str, Any]) -> bool:
        return await self.remove_container(handle["container_id"])

    async def cut_network(self, handle: dict[str, Any]) -> None:
        await self.disconnect_all(handle["container_id"])

    async def list_own(self) -> list[OwnSandbox]:
        """Containers labelled ``codemode=1`` by this runtime; created, exited or dead ones
        can never run again (a failed start, a worker killed mid-release)."""
        try:
            found = await asyncio.to_thread(self.api.containers, all=True, filters={"label": f"{LABEL}=1"})
        except (APIError, DockerException, OSError) as exc:
            raise SandboxError(f"cannot list containers: {exc}") from exc
        now = time.time()
        return [
            OwnSandbox(
                {"container_id": c["Id"]},
                float((c.get("Labels") or {}).get(LABEL_CREATED) or c.get("Created") or now),
                usable=c.get("State") in ("running", "paused"),
                labels=dict(c.get("Labels") or {}),
            )
            for c in found
            if (c.get("Labels") or {}).get(LABEL_RUNTIME) == "docker"
        ]

    async def aclose(self) -> None:
        """Close every handle of this runtime: remove their containers, except those whose
        checkpoint is current (they are only detached)."""
        await super().aclose()
        with contextlib.suppress(Exception):
            self.client.close()
