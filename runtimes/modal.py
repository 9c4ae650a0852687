"""``ModalRuntime``: the code runs in a Modal sandbox, and the running sandbox is the checkpoint.

On the unmodified ``modal`` SDK (pinned: its protocol is private and moving). The sandbox's
entrypoint is the FIFO loader (``runtimes/runner/fifo.py``): it reads our runner
(one zip, ``runtimes/runner/package.py``) and its input from a FIFO in the sandbox, and the runner's
protocol and the code's output go to the sandbox's own stdout and stderr. The lifecycle is
every provider's (``runtimes/runner/sandbox_runtime.py``).

How a worker reaches the runner, from any worker:

* **Output**: the sandbox's stdio is read by byte offset from the task command router
  (``SandboxStdioReadV2``). A handle from ``Sandbox.from_id`` reads from offset 0, so a
  re-attaching worker sees what was written before again: what was handled before the
  checkpoint is skipped by its output mark.
* **Input**: a fresh relay exec per attachment (``sandbox.exec``), whose stdin is copied into
  the FIFO, as the docker runtime does for podman. Not the entrypoint's own stdin: it is
  written by byte offset (``SandboxStdinWriteV2``) and a ``from_id`` handle's writer starts at
  offset 0 (``modal/io_streams.py``, ``_StreamWriter._offset``), so a second worker's bytes
  would be taken for retries of the first's.

The handle is the sandbox id. Modal has no pause that keeps processes for regular
sandboxes (its persistent sandboxes and memory snapshots are experimental, and a snapshot
restores into a new sandbox), so a parked run's sandbox keeps running, and billing, for the
park grace period (``CODEMODE_PARK_RELEASE_AFTER``); then it is terminated and the run goes on
by journal replay in a fresh sandbox when it is approved.
``block_network=True`` unless the request asks for ``network="full"``.

Settings: ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` (or ``token_id=``/``token_secret=``, or
a ``modal token`` profile) are required: missing, the runtime refuses to build with a clear
error. ``MODAL_SERVER_URL`` points the SDK elsewhere (a local test server);
``CODEMODE_MODAL_IMAGE`` (or ``image=``): an image id (``im-...``) or a registry tag. Requires
PyPI ``modal`` (the ``modal`` extra).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable
from typing import Any

try:
    import modal
    from modal.config import config as _modal_config
    from modal.exception import Error as ModalError
    from modal.exception import NotFoundError
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the modal runtime needs the Modal SDK: pip install 'durable-codemode[modal]' "
        "(or pip install 'modal==1.6.4'), and MODAL_TOKEN_ID and MODAL_TOKEN_SECRET set"
    ) from exc

from .constraints import CodeConstraints
from .errors import SandboxError
from .runner.driver import RunnerExit
from .runner.fifo import LOADER, RELAY
from .runner.provider import OwnSandbox, RunnerProcess, SandboxSpec, Stdio
from .runner.sandbox_run import RUNNER_ZIP
from .runner.sandbox_runtime import SandboxRuntime
from .types import CheckpointTier, RuntimeCapabilities

log = logging.getLogger(__name__)

TAG = "codemode"
TAG_CREATED = "codemode.created"

MODAL_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in a remote Modal sandbox: the standard library and the image's installed "
        "packages import normally and the files are the sandbox's own; there is no network unless the "
        "execution asks for it. Randomness is seeded per execution; call a tool when you need the real "
        "current time."
    )
)


class ModalSettingsError(ValueError):
    """The runtime cannot be used as configured (no token): nothing was started."""


def sandbox_exit(returncode: int | None) -> RunnerExit:
    """A finished sandbox's return code (Modal's: 137 terminated, 124 past its timeout)."""
    if returncode == 137:
        return RunnerExit(status=137, removed=True, detail="the sandbox was terminated")
    if returncode == 124:
        return RunnerExit(status=124, removed=True, detail="the sandbox reached its timeout")
    if returncode is not None and returncode > 128:
        return RunnerExit(signal=returncode - 128, detail=f"exit status {returncode}")
    return RunnerExit(status=returncode, detail=f"exit status {returncode}")


class _ModalProcess(RunnerProcess):
    """The runner as the sandbox's entrypoint: its output read from the sandbox's stdio, its
    input through a relay exec'd for this attachment."""

    def __init__(self, sandbox: Any, relay: Any, stdio: Stdio) -> None:
        self.sandbox = sandbox
        self.relay = relay
        self.readers = [
            asyncio.create_task(self._read(sandbox.stdout, stdio.on_stdout)),
            asyncio.create_task(self._read(sandbox.stderr, stdio.on_stderr)),
        ]

    @staticmethod
    async def _read(stream: Any, deliver: Callable[[str], None]) -> None:
        async for chunk in stream:
            deliver(chunk)

    async def write(self, data: bytes) -> None:
        self.relay.stdin.write(data)
        await self.relay.stdin.drain.aio()

    async def wait(self) -> RunnerExit:
        try:
            await asyncio.gather(*self.readers)  # until the entrypoint's output ends
            # ``wait`` returns nothing: the code is the sandbox's ``returncode`` after it.
            await self.sandbox.wait.aio(raise_on_termination=False)
            returncode = self.sandbox.returncode
        except ModalError as exc:
            return RunnerExit(lost=f"reading the sandbox's output failed: {exc}")
        return sandbox_exit(returncode)

    async def kill(self) -> None:
        await self.sandbox.terminate.aio()

    async def close(self) -> None:
        for reader in self.readers:
            reader.cancel()
        with contextlib.suppress(Exception):
            self.relay.stdin.write_eof()  # the relay ends; the runner does not
            await asyncio.wait_for(self.relay.stdin.drain.aio(), 5.0)
        await asyncio.gather(*self.readers, return_exceptions=True)


class ModalRuntime(SandboxRuntime):
    """Real CPython in a Modal sandbox, one sandbox per execution (or session).

    :param image: an image id (``im-...``, ``Image.from_id``) or a registry tag
        (``Image.from_registry``); default ``CODEMODE_MODAL_IMAGE``, else Modal's Debian slim
        image. Its ``python`` (default ``python3``, 3.9 or newer) runs the runner.
    :param app_name: the Modal app the sandboxes belong to (made when missing).
    :param sandbox_timeout: seconds a sandbox lives at most (Modal's ``timeout``, at most a
        day): a run parked longer is rebuilt by replay.
    :param idle_timeout: end a sandbox after this long without activity (None: only the timeout).
    :param cpu, memory_mb: the sandbox's reservation (Modal's defaults when None); the code's
        own memory limit is ``ExecutionLimits.max_memory_bytes`` (``RLIMIT_DATA`` inside).
    :param token_id, token_secret: credentials (default ``MODAL_TOKEN_ID``,
        ``MODAL_TOKEN_SECRET`` or the active profile).
    :param sync_timeout: seconds a re-attached runner has to say where it is.
    """

    name = "modal"
    constraints = MODAL_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="modal",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=True,
        network=False,
        checkpoint_tier=CheckpointTier.SESSION,
        type_checking=False,
        startup_latency_ms=1000.0,
        sessions=True,
        network_policies=("none", "full"),
    )
    handle_keys = ("sandbox_id",)
    replays_output = True

    def __init__(
        self,
        *,
        image: str | None = None,
        app_name: str = "codemode",
        sandbox_timeout: int = 3600,
        idle_timeout: int | None = None,
        cpu: float | None = None,
        memory_mb: int | None = None,
        token_id: str | None = None,
        token_secret: str | None = None,
        python: str = "python3",
        startup_timeout: float = 120.0,
        kill_grace: float = 1.0,
        sync_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        self.token_id = token_id or _modal_config.get("token_id")
        self.token_secret = token_secret or _modal_config.get("token_secret")
        if not self.token_id or not self.token_secret:
            raise ModalSettingsError(
                "ModalRuntime needs a Modal token: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (or pass "
                "token_id=/token_secret=, or run `modal token new`); for a local server also set MODAL_SERVER_URL"
            )
        self.image = image or os.environ.get("CODEMODE_MODAL_IMAGE") or None
        self.app_name = app_name
        self.sandbox_timeout = int(sandbox_timeout)
        self.idle_timeout = idle_timeout
        self.cpu = cpu
        self.memory_mb = memory_mb
        self.python = python
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.sync_timeout = sync_timeout
        self._client: Any = None
        self._app: Any = None

    def describe(self, handle: dict[str, Any]) -> str:
        return f"Modal sandbox {handle.get('sandbox_id', '?')}"

    async def _modal(self) -> tuple[Any, Any]:
        """The SDK's client and our app (made on first use, in the running loop)."""
        if self._client is None:
            self._client = await modal.Client.from_credentials.aio(self.token_id, self.token_secret)
        if self._app is None:
            self._app = await modal.App.lookup.aio(self.app_name, create_if_missing=True, client=self._client)
        return self._client, self._app

    def _image(self) -> Any:
        if self.image is None:
            return modal.Image.debian_slim()
        if self.image.startswith("im-"):
            return modal.Image.from_id(self.image)
        return modal.Image.from_registry(self.image)

    # -- session operations -------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> tuple[dict[str, Any], Any]:
        env = {"PYTHONHASHSEED": str(spec.hash_seed), "PYTHONDONTWRITEBYTECODE": "1", "MALLOC_ARENA_MAX": "2"}
        try:
            client, app = await self._modal()
            sandbox = await modal.Sandbox.create.aio(
                self.python,
                "-s",
                "-c",
                LOADER,
                app=app,
                image=self._image(),
                env=env,
                tags={**spec.labels, TAG: "1", TAG_CREATED: str(int(time.time()))},
                timeout=self.sandbox_timeout,
                idle_timeout=self.idle_timeout,
                cpu=self.cpu,
                memory=self.memory_mb,
                block_network=spec.options.network == "none",
                client=client,
            )
        except ModalError as exc:
            raise SandboxError(f"cannot create a Modal sandbox: {exc}") from exc
        return {"sandbox_id": sandbox.object_id}, sandbox

    async def _attach(self, sandbox: Any, stdio: Stdio) -> _ModalProcess:
        relay = await sandbox.exec.aio(self.python, "-s", "-c", RELAY)
        return _ModalProcess(sandbox, relay, stdio)

    async def start_runner(
        self, handle: dict[str, Any], sandbox: Any, spec: SandboxSpec, stdio: Stdio
    ) -> RunnerProcess:
        try:
            process = await self._attach(sandbox, stdio)
            await process.write(b"%d\n" % len(RUNNER_ZIP) + RUNNER_ZIP)  # the loader reads it first
        except ModalError as exc:
            raise SandboxError(f"cannot start the runner in Modal sandbox {handle['sandbox_id']}: {exc}") from exc
        return process

    async def reattach(self, handle: dict[str, Any], stdio: Stdio) -> RunnerProcess | None:
        sandbox_id = handle["sandbox_id"]
        try:
            client, _ = await self._modal()
            sandbox = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
            if await sandbox.poll.aio() is not None:
                return None  # finished: terminated, past its timeout, or the runner exited
            return await self._attach(sandbox, stdio)
        except NotFoundError:
            return None
        except ModalError as exc:
            raise SandboxError(f"cannot reach Modal sandbox {sandbox_id}: {exc}") from exc

    async def destroy(self, handle: dict[str, Any]) -> bool:
        sandbox_id = handle["sandbox_id"]
        try:
            client, _ = await self._modal()
            sandbox = await modal.Sandbox.from_id.aio(sandbox_id, client=client)
            running = await sandbox.poll.aio() is None
            await sandbox.terminate.aio()
        except NotFoundError:
            return False
        except ModalError as exc:
            raise SandboxError(f"cannot terminate Modal sandbox {sandbox_id}: {exc}") from exc
        return running

    async def list_own(self) -> list[OwnSandbox]:
        try:
            client, app = await self._modal()
            found = [s async for s in modal.Sandbox.list.aio(app_id=app.app_id, tags={TAG: "1"}, client=client)]
            own = []
            for sandbox in found:
                tags = await sandbox.get_tags.aio()
                own.append(
                    OwnSandbox(
                        {"sandbox_id": sandbox.object_id}, float(tags.get(TAG_CREATED) or 0), usable=True, labels=tags
                    )
                )
        except ModalError as exc:
            raise SandboxError(f"cannot list Modal sandboxes: {exc}") from exc
        return own

    def memory_note(self, limits: Any) -> str:
        return f" (its reservation is {self.memory_mb} MiB)" if self.memory_mb else ""
