"""``DockerRuntime``: the code runs in a fresh container of any image with ``python3``.

Any engine that serves the Docker API works (Docker, or podman's ``podman system
service``), named by ``DOCKER_HOST`` or ``base_url``; any image whose ``python3`` (on its
PATH, 3.9 or newer) runs our standard-library runner (``runtimes/runner/in_sandbox.py``, the
python and e2b runtimes' runner). Nothing is baked into the image: the container's command
is a few lines of loader (``LOADER``) that make a FIFO in the container's private ``/tmp``,
read the runner's source from it, and run it; the runner then reads its bootstrap (the code,
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
(the code's ``max_memory_bytes`` as ``RLIMIT_AS`` inside, and as the cgroup's limit plus
the interpreter's headroom), one CPU, no log driver (the code's output is not kept by the
engine). Every container carries the label ``codemode=1``; ``sweep()`` removes the ones a
crashed worker left.

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
import hashlib
import logging
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

try:
    import docker
    from docker.errors import APIError, DockerException, ImageNotFound, NotFound
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the docker runtime needs the Docker SDK: pip install 'durable-codemode[docker]' (or pip install 'docker>=7')"
    ) from exc

from .base import CodeRuntime
from .checkpoint import decode_checkpoint, encode_checkpoint
from .constraints import CodeConstraints
from .errors import CodeExecutionError, CodeResourceError, CodeRuntimeError, CodeTimeoutError, SandboxError
from .execution import CallOutcome, CodeExecution, Step
from .runner.bootstrap import RUNNER_PATH, build_bootstrap, runner_limits
from .runner.driver import RunnerDriver
from .runner.mounts import check_mounts
from .runner.process import OutputSink
from .signatures import FunctionsSpec, ToolSignature, normalize_functions
from .transports.command import CommandChannel
from .transports.protocol import SyncedMessage
from .types import CheckpointTier, Determinism, ExecutionLimits, FunctionCall, RuntimeCapabilities, SandboxOptions

log = logging.getLogger(__name__)

_RUNNER_SOURCE = RUNNER_PATH.read_bytes()
#: Checkpoints name the blob format and the runner they talk to: a checkpoint taken with
#: another runner is refused (replay), never resumed with a host that speaks differently.
DOCKER_CHECKPOINT_VERSION = "1-" + hashlib.sha256(_RUNNER_SOURCE).hexdigest()[:12]

#: Where the runner's input comes from: a FIFO in the container's private tmpfs. Not the
#: container's stdin: podman closes that for good when the first client attached to it goes
#: away (a worker that dies, or detaches before a pause), so no other worker could answer.
INPUT_FIFO = "/tmp/.codemode-in"

#: The container's command: make the FIFO, hold it open for reading and writing (so writers
#: coming and going never look like an end of input) as fd 0, read ``<length>\\n<runner
#: source>`` from it unbuffered (the bootstrap line after it stays for the runner) and run
#: the runner as ``__main__``.
LOADER = f"""\
import os
try:
    os.mkfifo({INPUT_FIFO!r}, 0o600)
except FileExistsError:
    pass
fd = os.open({INPUT_FIFO!r}, os.O_RDWR)
os.dup2(fd, 0)
os.close(fd)
def take(n):
    b = b""
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(70)
        b += c
    return b
h = b""
while not h.endswith(b"\\n"):
    h += take(1)
src = take(int(h))
exec(compile(src, "codemode-runner.py", "exec"), {{"__name__": "__main__", "__builtins__": __builtins__}})
"""

#: What a worker execs in the container to reach the runner: its stdin (the exec's attach
#: stream) copied into the FIFO. It ends when the worker's connection does; the runner does not.
RELAY = f"""\
import os
try:
    os.mkfifo({INPUT_FIFO!r}, 0o600)
except FileExistsError:
    pass
fd = os.open({INPUT_FIFO!r}, os.O_WRONLY)
while True:
    data = os.read(0, 1 << 16)
    if not data:
        break
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
"""

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
        self._decoders = {1: codecs.getincrementaldecoder("utf-8")("replace"), 2: codecs.getincrementaldecoder("utf-8")("replace")}
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


# -- one execution ----------------------------------------------------------------------------


class _DockerRun(RunnerDriver):
    """One execution in one container, seen from this worker."""

    runtime_name = "docker"

    def __init__(
        self,
        runtime: DockerRuntime,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        stdout_before: int = 0,
    ) -> None:
        super().__init__(signatures, limits, kill_grace=runtime.kill_grace)
        self.runtime = runtime
        self.options = options
        self.sink = OutputSink(max(0, limits.max_stdout_bytes - stdout_before))
        self.stdout_before = stdout_before
        self.container_id = ""
        self.pid = 0
        self.output_stream: _Connection | None = None  # the container's attach stream
        self.relay: _Connection | None = None  # stdin of the relay exec'd into it
        self.channel: CommandChannel = CommandChannel(on_output=self._on_output)
        self.ended = asyncio.Event()  # the attach stream ended (and we learnt why)
        self.exit: dict[str, Any] | None = None  # the container's final State
        self.lost: str | None = None  # the stream ended with the container still there
        self.attached = False
        #: The last checkpoint taken (or restored) is still where the runner is.
        self.parked = False
        self.discarded = False
        #: False once another handle drove the runner past this one's checkpoint: closing
        #: it must not remove a container someone else is using.
        self.owned = True
        #: Why the network was cut (the ratchet), once it is.
        self.network_cut: str | None = None
        self._watcher: asyncio.Task[None] | None = None

    def _on_output(self, text: str) -> None:
        self.sink.feed(text.encode("utf-8", "replace"))

    # -- start --------------------------------------------------------------------------

    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        rt = self.runtime
        self.container_id = await rt.create_container(self.limits, self.options, determinism.hash_seed)
        await rt.call(rt.api.start, self.container_id)
        await self.attach()
        boot = build_bootstrap(
            code,
            self.signatures,
            inputs=inputs,
            # The container is the isolation: its pids limit, not RLIMIT_NPROC (which counts
            # every process of uid 65534 on the engine's host); memory and CPU as everywhere.
            limits=runner_limits(self.limits, processes=None, file_bytes=None),
            transport=self.channel.params,
            sys_path=[],
            determinism=determinism,
            output_marks=True,
        )
        assert self.relay is not None
        await self.relay.write(b"%d\n" % len(_RUNNER_SOURCE) + _RUNNER_SOURCE)
        await self.channel.send(boot.model_dump(mode="json"), fresh_line=False)
        await self.expect_ready(rt.startup_timeout, f"the runner in container {self.short}")
        if not self.pid:
            self.pid = int((await self.runtime.inspect(self.container_id) or {}).get("State", {}).get("Pid") or 0)

    @property
    def short(self) -> str:
        return self.container_id[:12]

    async def attach(self) -> None:
        """Connect to the container: its output (the runner's protocol on stdout, the code's
        output on stderr) through the attach stream, and the runner's input through a relay
        process exec'd into it."""
        rt = self.runtime
        sock = await rt.call(rt.api.attach_socket, self.container_id, params={"stdout": 1, "stderr": 1, "stream": 1})
        output = _Connection(sock, self.channel.feed_stdout, self.channel.feed_stderr)
        await output.open()
        try:
            exec_id = (
                await rt.call(
                    rt.api.exec_create, self.container_id, [rt.python, "-s", "-c", RELAY], stdin=True, stdout=False, stderr=False
                )
            )["Id"]
            relay = _Connection(await rt.call(rt.api.exec_start, exec_id, socket=True))
            await relay.open()
        except BaseException:
            await output.close()
            raise
        self.output_stream, self.relay = output, relay
        self.attached = True
        self.ended.clear()
        self.exit, self.lost = None, None
        self.channel.bind(relay.write)
        self._watcher = asyncio.create_task(self._watch(output))

    async def _watch(self, attachment: _Connection) -> None:
        """Learn how the attach stream ended: the container exited, or the stream dropped."""
        try:
            await attachment.closed.wait()
        except asyncio.CancelledError:
            if self.attached:
                raise
            return
        if not self.attached:  # detach() closed it
            return
        state = await self.runtime.final_state(self.container_id)
        if state is None:
            self.lost = "the attach stream ended while the container still runs"
        else:
            self.exit = state
        self.attached = False
        self.ended.set()
        self.channel.sandbox_exited()

    async def detach(self) -> None:
        """Stop receiving the runner's events and close the relay; the container keeps running
        (or waiting)."""
        output, relay = self.output_stream, self.relay
        self.output_stream = self.relay = None
        self.attached = False
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None
        for connection in (relay, output):
            if connection is not None:
                await connection.close()

    # -- restore ------------------------------------------------------------------------

    async def reattach(self) -> str:
        """Attach to the runner again and check it is where the checkpoint says (``calls``
        issued, waiting on exactly the pending ones). Returns ``"in_step"``, ``"gone"``
        (the container or its process), ``"silent"`` (no answer to the sync) or
        ``"moved_on"`` (another handle drove it further: what it emitted meanwhile is lost)."""
        rt = self.runtime
        info = await rt.inspect(self.container_id)
        if info is None:
            return "gone"
        state = info.get("State", {})
        status = state.get("Status")
        if status == "paused":
            await rt.call(rt.api.unpause, self.container_id)
        elif status != "running":
            return "gone"
        if self.pid and int(state.get("Pid") or 0) != self.pid:
            return "gone"  # another process tree than the one the checkpoint names
        self.channel.reset()
        await self.attach()
        nonce = secrets.token_hex(8)
        try:
            await self.channel.send({"type": "sync", "nonce": nonce})
            reply = await asyncio.wait_for(self.receive(), rt.sync_timeout)
        except (SandboxError, CodeExecutionError, asyncio.TimeoutError) as exc:
            log.info("container %s: no answer to sync (%s)", self.short, exc)
            return "silent"
        if reply is None:
            return "gone"
        if not isinstance(reply, SyncedMessage) or reply.nonce != nonce:
            log.info("container %s: runner sent %r instead of its position", self.short, reply)
            return "moved_on"
        if reply.calls != self.tool_calls or set(reply.waiting) != set(self.outstanding):
            log.info(
                "container %s: runner is at %d calls waiting on %s, the checkpoint at %d waiting on %s",
                self.short, reply.calls, reply.waiting, self.tool_calls, sorted(self.outstanding),
            )  # fmt: skip
            return "moved_on"
        return "in_step"

    async def _unpark(self) -> None:
        """First use of a handle after its checkpoint: go on as is when it watched the whole
        time and nothing came; otherwise verify like a restore."""
        self.parked = False
        if self.attached and self.channel.idle:
            return
        await self.detach()
        state = await self.reattach()
        if state != "in_step":
            if state == "moved_on":
                self.owned = False  # someone else drives it: closing this handle must not remove it
            await self.detach()
            raise SandboxError(
                f"container {self.short} is {'ahead of' if state == 'moved_on' else 'lost to'} this checkpoint: "
                "restore the current checkpoint (or replay the journal) instead"
            )

    # -- the network ratchet ------------------------------------------------------------

    async def cut_network(self, reason: str) -> bool:
        """Disconnect the container from every network, for good, and check it is off.
        False when there was nothing to cut (no network, or already cut)."""
        if self.options.network != "ratchet" or self.network_cut is not None:
            return False
        if self.parked and not self.closed:
            await self._unpark()
        await self.runtime.disconnect_all(self.container_id)
        self.network_cut = reason
        log.info("container %s: network cut (%s)", self.short, reason)
        return True

    # -- driver hooks -------------------------------------------------------------------

    @property
    def output(self) -> OutputSink:
        return self.sink

    async def wait_output(self, timeout: float) -> None:
        if self.done and self.channel.marks_arrive:
            return  # the final message waited for its output mark: everything printed is here
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ended.wait(), timeout)

    async def death_error(self) -> CodeExecutionError | SandboxError:
        await self.wait_output(2.0)
        tail = self.sink.tail()
        if self.exit is None:
            return SandboxError(f"lost the connection to the runner in container {self.short}: {self.lost}")
        if self.exit.get("Status") == "removed" and not self.timed_out:
            # Not the code's doing: the step fails, and the next one replays in a fresh container.
            return SandboxError(f"container {self.short} was removed while the code ran")
        code = int(self.exit.get("ExitCode") or 0)
        if not self.ready:
            return SandboxError(
                f"the runner in container {self.short} exited (status {code}) before the code started: "
                f"{tail or self.exit.get('Error') or 'no output'}"
            )
        if self.timed_out:
            limit = self.limits.timeout_seconds
            return CodeTimeoutError(
                f"the code exceeded its time limit of {limit:g} s and was killed", error_type="TimeoutError"
            )
        if self.exit.get("OOMKilled"):
            return CodeResourceError(
                f"the container ran out of memory (its limit is {self.runtime.memory_limit(self.limits) >> 20} MiB) "
                "and the code was killed",
                error_type="MemoryError",
                traceback=tail or None,
            )
        if code == 128 + 9:
            return CodeResourceError(
                "the code's process was killed (SIGKILL): it exceeded its CPU time or the container ran out of memory",
                error_type="ResourceError",
                traceback=tail or None,
            )
        if code > 128:
            return CodeRuntimeError(
                f"the code's process died from signal {code - 128}", error_type="Crash", traceback=tail or None
            )
        return CodeRuntimeError(
            f"the code ended the interpreter (exit status {code}) before finishing",
            error_type="SystemExit",
            traceback=tail or None,
        )

    async def kill_for_timeout(self) -> None:
        with contextlib.suppress(SandboxError):
            await self.runtime.call(self.runtime.api.kill, self.container_id)

    async def advance(self) -> Step:
        if self.parked:
            await self._unpark()
        return await super().advance()

    async def answer(self, call_id: str, outcome: CallOutcome) -> None:
        if self.parked and not self.closed:
            await self._unpark()
        await super().answer(call_id, outcome)

    async def release(self) -> None:
        keep = self.parked and self.failed is None and not self.done and not self.discarded
        try:
            await self.detach()
            if not keep and self.owned and self.container_id:
                self.runtime.remove_later(self.container_id)
        finally:
            self.runtime._live.discard(self)

    # -- checkpoint ---------------------------------------------------------------------

    def dump(self) -> bytes:
        self.parked = True
        meta = {
            "container_id": self.container_id,
            "pid": self.pid,
            "calls": self.tool_calls,
            "pending": [c.model_dump(mode="json") for c in self.outstanding.values()],
            "blocked_on": list(self.blocked_on),
            "limits": self.limits.model_dump(mode="json"),
            "options": self.options.model_dump(mode="json"),
            "network_cut": self.network_cut,
            "compute_seconds": self.clock.elapsed(),
            "stdout_bytes": self.stdout_before + len(self.sink.data),
        }
        return encode_checkpoint("docker", DOCKER_CHECKPOINT_VERSION, meta, b"")

    @classmethod
    def from_checkpoint(cls, runtime: DockerRuntime, meta: Mapping[str, Any]) -> _DockerRun:
        limits = ExecutionLimits.model_validate(meta["limits"])
        options = SandboxOptions.model_validate(meta.get("options") or {})
        run = cls(runtime, {}, limits, options, stdout_before=int(meta.get("stdout_bytes", 0)))
        run.container_id = str(meta["container_id"])
        run.pid = int(meta.get("pid") or 0)
        run.tool_calls = int(meta["calls"])
        run.seen = {str(i) for i in range(1, run.tool_calls + 1)}  # the runner numbers calls 1, 2, ...
        pending = [FunctionCall.model_validate(c) for c in meta["pending"]]
        run.outstanding = {c.call_id: c for c in pending}
        run.blocked_on = tuple(str(i) for i in meta.get("blocked_on", ()))
        run.network_cut = meta.get("network_cut")
        run.clock.used = float(meta.get("compute_seconds", 0.0))
        run.ready = True
        return run

    def execution(
        self, *, dump: Any = None, pending: list[FunctionCall] | None = None, cut_network: Any = None
    ) -> CodeExecution:
        return super().execution(dump=dump, pending=pending, cut_network=cut_network or self.cut_network)


# -- the runtime ------------------------------------------------------------------------------


class DockerRuntime(CodeRuntime):
    """Real CPython in a fresh container per execution; checkpoints are the (paused)
    container itself.

    :param image: the image to run (default ``CODEMODE_DOCKER_IMAGE``); any image whose
        ``python`` (default ``python3``) is CPython 3.9 or newer.
    :param base_url: the engine (default ``DOCKER_HOST``, else the SDK's default socket).
    :param cpus: CPUs the container may use (``nano_cpus``).
    :param max_processes: the container's pids limit (processes and threads).
    :param tmpfs_bytes: size of each private tmpfs (``/tmp``, ``/sandbox``).
    :param memory_headroom: bytes the container may use beyond the code's
        ``max_memory_bytes`` (``RLIMIT_AS`` inside): the interpreter, the runner, the init.
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
        self._live: set[_DockerRun] = set()
        self._removals: set[asyncio.Task[None]] = set()

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

    async def create_container(self, limits: ExecutionLimits, options: SandboxOptions, hash_seed: int) -> str:
        """Create (not start) a container for one execution, hardened; its id."""
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
            labels={**self.labels, LABEL_CREATED: str(int(time.time()))},
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

    def remove_later(self, container_id: str) -> None:
        """Remove a container off the step's critical path (``aclose`` waits for it; a worker
        killed before it happens leaves it to ``sweep``)."""
        task = asyncio.get_running_loop().create_task(self._remove_quietly(container_id))
        self._removals.add(task)
        task.add_done_callback(self._removals.discard)

    async def _remove_quietly(self, container_id: str) -> None:
        try:
            await self.remove_container(container_id)
        except SandboxError as exc:  # the sweep gets it later
            log.warning("%s", exc)

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

    async def sweep(
        self, *, max_age: timedelta = timedelta(days=8), grace: timedelta = timedelta(minutes=10)
    ) -> list[str]:
        """Remove this runtime's orphans: containers labelled ``codemode=1`` that can no longer
        run (created, exited, dead: a failed start, a worker killed mid-release) once older
        than ``grace`` (another worker may be starting or inspecting one right now), and any
        older than ``max_age`` (past every approval timeout: no run waits on them). Running
        and paused containers younger than that may be parked runs and are kept. The ids
        removed."""
        try:
            found = await asyncio.to_thread(self.api.containers, all=True, filters={"label": f"{LABEL}=1"})
        except (APIError, DockerException, OSError) as exc:
            raise SandboxError(f"cannot list containers: {exc}") from exc
        now = time.time()
        mine = {run.container_id for run in self._live}
        removed = []
        for c in found:
            labels = c.get("Labels") or {}
            if labels.get(LABEL_RUNTIME) != "docker" or c["Id"] in mine:
                continue
            age = now - float(labels.get(LABEL_CREATED) or c.get("Created") or now)
            usable = c.get("State") in ("running", "paused")
            if age < (max_age if usable else grace).total_seconds():
                continue
            if await self.remove_container(c["Id"]):
                removed.append(c["Id"])
        if removed:
            log.info("removed %d orphaned codemode containers", len(removed))
        return removed

    def _decode(self, checkpoint: bytes) -> dict[str, Any] | None:
        decoded = decode_checkpoint(checkpoint, "docker", DOCKER_CHECKPOINT_VERSION)
        if decoded is None:
            return None
        meta = decoded[0]
        if not isinstance(meta, dict) or not meta.get("container_id"):
            return None
        return meta

    def _local_runs(self, container_id: str) -> list[_DockerRun]:
        return [run for run in self._live if run.container_id == container_id]

    def check_options(self, options: SandboxOptions | None) -> SandboxOptions:
        """What the capabilities refuse, and mounts the engine cannot give (see ``check_mounts``)."""
        options = super().check_options(options)
        check_mounts(options.mounts, reserved=(WORKDIR,))
        return options

    # -- CodeRuntime --------------------------------------------------------------------

    async def execute(
        self,
        code: str,
        *,
        functions: FunctionsSpec,
        inputs: Mapping[str, Any] | None = None,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
    ) -> CodeExecution:
        options = self.check_options(options)
        run = _DockerRun(self, normalize_functions(functions), limits or ExecutionLimits(), options)
        self._live.add(run)
        try:
            await run.start(code, inputs, determinism or Determinism.derived(code, inputs))
        except BaseException:
            await run.close()
            raise
        return run.execution(dump=run.dump)

    async def type_check(self, code: str, signatures: FunctionsSpec) -> None:
        """No static type checking; a syntax check here, without a container."""
        from .python import PythonRuntime

        await PythonRuntime.type_check(self, code, signatures)  # type: ignore[arg-type]

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        meta = self._decode(checkpoint)
        if meta is None:
            return None
        try:
            run = _DockerRun.from_checkpoint(self, meta)
        except (KeyError, TypeError, ValueError):
            log.warning("refusing a docker checkpoint with an unreadable header")
            return None
        self._live.add(run)
        try:
            state = await run.reattach()
        except BaseException:
            self._live.discard(run)
            await run.detach()
            raise
        if state != "in_step":
            # Whatever is left cannot continue this run: the caller replays in a fresh container.
            log.info("container %s cannot continue this checkpoint (%s): removing it", run.short, state)
            run.discarded = True
            await run.close()
            return None
        run.parked = True
        run.start_watchdog()
        return run.execution(dump=run.dump, pending=list(run.outstanding.values()))

    async def suspend(self, checkpoint: bytes) -> None:
        """Pause the container (detaching this worker's handles first)."""
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(meta["container_id"]):
            await run.detach()
            if not run.parked:  # it ran past this checkpoint: it cannot go on after the pause
                run.lost = "the container was paused under this handle"
                run.channel.sandbox_exited()
        try:
            await asyncio.to_thread(self.api.pause, meta["container_id"])
        except NotFound:
            pass  # gone: the next step replays
        except APIError as exc:
            if "paused" in str(exc).lower():
                return  # already paused
            if "not running" in str(exc).lower():
                return  # exited: the next step replays
            raise SandboxError(f"cannot pause container {meta['container_id'][:12]}: {exc}") from exc
        except (DockerException, OSError) as exc:
            raise SandboxError(f"cannot pause container {meta['container_id'][:12]}: {exc}") from exc

    async def discard(self, checkpoint: bytes) -> None:
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(meta["container_id"]):
            run.discarded = True
            await run.close()
        await self.remove_container(meta["container_id"])

    async def aclose(self) -> None:
        """Close every handle of this runtime: remove their containers, except those whose
        checkpoint is current (they are only detached)."""
        for run in list(self._live):
            await run.close()
        while self._removals:
            await asyncio.gather(*list(self._removals), return_exceptions=True)
        with contextlib.suppress(Exception):
            self.client.close()

