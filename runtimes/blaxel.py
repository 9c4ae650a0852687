"""``BlaxelRuntime``: the code runs in a Blaxel sandbox, and the sandbox is the checkpoint.

The shape is the E2B runtime's (``runtimes/e2b.py``), on the unmodified ``blaxel`` SDK: a
sandbox from the configured image; our runner (one zip, ``runtimes/runner/package.py``) uploaded
with ``fs.write_binary`` and started as a named process with a stdin pipe; its protocol goes out
through the process's log stream (``process.stream_logs``) and the answers come in through
``process.write_stdin``. Nothing listens in the sandbox and no credential or host address
enters it. The lifecycle is every provider's (``runtimes/runner/sandbox_runtime.py``).

* **Parked**: the worker detaches (closes the log stream) and the sandbox goes to standby
  on its own when idle; Blaxel's standby keeps memory and processes. There is no explicit
  pause call.
* **Restore** on any worker: ``SandboxInstance.get(name)`` wakes it, ``stream_logs`` on the
  runner's process (it replays what was written, then follows: what was handled before
  the checkpoint is skipped by its output mark) and the runner's ``sync``. A sandbox or a
  runner that is gone is rebuilt by journal replay.
* **Network**: Blaxel has no single switch; ``network="none"`` (the default) creates the
  sandbox with the firewall's ``proxy`` ruleset (egress only through Blaxel's proxy) and a
  proxy that forbids every domain (``"*"``). ``network="full"`` sets no network rules.

Settings: ``BL_API_KEY`` and ``BL_WORKSPACE`` (or ``api_key=``/``workspace=``, or a
``bl login`` config) are required: missing, the runtime refuses to build with a clear error.
``CODEMODE_BLAXEL_API_URL`` (or ``api_url=``) points the SDK's control plane elsewhere (a
local test server); ``CODEMODE_BLAXEL_IMAGE`` (or ``image=``) the image. The SDK keeps one
configuration per process (its module-level client): one Blaxel account per worker.
Requires PyPI ``blaxel`` (the ``blaxel`` extra).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
from datetime import datetime
from typing import Any

os.environ.setdefault("DO_NOT_TRACK", "1")  # the SDK's telemetry: a worker does not phone home

try:
    from blaxel.core import SandboxInstance
    from blaxel.core.authentication import ApiKey, CredentialsType, get_credentials
    from blaxel.core.client import client as _control_plane
    from blaxel.core.common.settings import settings as _settings
    from blaxel.core.errors import BlaxelError
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the blaxel runtime needs the Blaxel SDK: pip install 'durable-codemode[blaxel]' "
        "(or pip install 'blaxel==0.4.24'), and BL_API_KEY and BL_WORKSPACE set"
    ) from exc

from .constraints import CodeConstraints
from .errors import SandboxError
from .runner.driver import RunnerExit
from .runner.provider import OwnSandbox, RunnerProcess, SandboxSpec, Stdio
from .runner.sandbox_run import RUNNER_ZIP
from .runner.sandbox_runtime import SandboxRuntime
from .types import CheckpointTier, RuntimeCapabilities

log = logging.getLogger(__name__)

#: Where the runner is uploaded in the sandbox.
RUNNER_FILE = "/tmp/codemode-runner.zip"
#: The runner's process name (the handle's second half).
RUNNER_PROCESS = "codemode-runner"
DEFAULT_IMAGE = "blaxel/base-image:latest"
#: ``network="none"``: egress only through Blaxel's proxy, and the proxy forbids every domain.
NO_NETWORK = {"firewall": {"rulesets": ["proxy"]}, "proxy": {"forbiddenDomains": ["*"]}}
LABEL = "codemode"

BLAXEL_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in a remote Blaxel sandbox: the standard library and the image's installed "
        "packages import normally and the files are the sandbox's own; there is no network unless the "
        "execution asks for it. Randomness is seeded per execution; call a tool when you need the real "
        "current time."
    )
)


class BlaxelSettingsError(ValueError):
    """The runtime cannot be used as configured (no credentials): nothing was started."""


def _status(exc: BaseException) -> int | None:
    return getattr(exc, "status", None) or getattr(exc, "status_code", None)


def process_exit(info: Any) -> RunnerExit:
    """The sandbox API's record of an ended process as a ``RunnerExit``."""
    status = str(getattr(info, "status", ""))
    status = getattr(getattr(info, "status", None), "value", status)
    code = int(getattr(info, "exit_code", 0) or 0)
    if status == "killed":
        return RunnerExit(signal=int(signal.SIGKILL), detail="killed")
    if code > 128:
        return RunnerExit(signal=code - 128, detail=f"{status} ({code})")
    return RunnerExit(status=code, detail=f"{status} (exit status {code})")


class _BlaxelProcess(RunnerProcess):
    """The runner as a named process of the sandbox: stdin by ``write_stdin``, output by its
    log stream (which the SDK reopens every 30 s, dropping lines it delivered)."""

    def __init__(self, sandbox: Any, name: str, stdio: Stdio) -> None:
        self.sandbox = sandbox
        self.name = name
        # The stream gives one line at a time without its newline.
        self.stream = sandbox.process.stream_logs(
            name,
            {
                "on_stdout": lambda line: stdio.on_stdout(line + "\n"),
                "on_stderr": lambda line: stdio.on_stderr(line + "\n"),
            },
        )

    async def write(self, data: bytes) -> None:
        await self.sandbox.process.write_stdin(self.name, data)

    async def wait(self) -> RunnerExit:
        while True:
            try:
                await self.stream.wait()  # returns when the stream ends, or is reopened
            except Exception as exc:  # the stream broke: the process may well live on
                return RunnerExit(lost=f"the log stream failed: {exc}")
            try:
                info = await self.sandbox.process.get(self.name)
            except BlaxelError as exc:
                if _status(exc) == 404:
                    return RunnerExit(removed=True, status=137, detail="the sandbox or the process is gone")
                return RunnerExit(lost=f"cannot read the runner's state: {exc}")
            if str(getattr(info.status, "value", info.status)) != "running":
                return process_exit(info)

    async def kill(self) -> None:
        await self.sandbox.process.kill(self.name)

    async def close(self) -> None:
        self.stream.close()


class BlaxelRuntime(SandboxRuntime):
    """Real CPython in a Blaxel sandbox, one sandbox per execution (or session).

    :param image: the sandbox's image (default ``CODEMODE_BLAXEL_IMAGE``, else Blaxel's
        base image); its ``python`` (default ``python3``, 3.9 or newer) runs the runner.
    :param memory_mb: the sandbox's memory (Blaxel's default is 4096); the code's own limit
        is ``ExecutionLimits.max_memory_bytes`` (``RLIMIT_DATA`` inside).
    :param region: where to create sandboxes (default ``BL_REGION``, else Blaxel picks).
    :param api_key, workspace: credentials (default ``BL_API_KEY``, ``BL_WORKSPACE``).
    :param api_url: the control plane (default ``CODEMODE_BLAXEL_API_URL``, else Blaxel's).
    :param labels: extra labels on every sandbox (``codemode=1`` is always set).
    :param sync_timeout: seconds a re-attached runner has to say where it is.
    """

    name = "blaxel"
    constraints = BLAXEL_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="blaxel",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=True,
        network=False,
        checkpoint_tier=CheckpointTier.SESSION,
        type_checking=False,
        startup_latency_ms=500.0,
        sessions=True,
        network_policies=("none", "full"),
    )
    handle_keys = ("sandbox", "process")
    parks_as = "standby"
    replays_output = True

    def __init__(
        self,
        *,
        image: str | None = None,
        memory_mb: int | None = None,
        region: str | None = None,
        api_key: str | None = None,
        workspace: str | None = None,
        api_url: str | None = None,
        python: str = "python3",
        labels: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        kill_grace: float = 1.0,
        sync_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        found = get_credentials()
        key = api_key or os.environ.get("BL_API_KEY") or (found.api_key if found else None)
        space = workspace or os.environ.get("BL_WORKSPACE") or (found.workspace if found else None)
        if not key or not space:
            missing = " and ".join(n for n, v in (("BL_API_KEY", key), ("BL_WORKSPACE", space)) if not v)
            raise BlaxelSettingsError(
                f"BlaxelRuntime needs Blaxel credentials: set {missing} (or pass api_key=/workspace=, or run "
                "`bl login`); for a local or self-hosted API also set CODEMODE_BLAXEL_API_URL"
            )
        url = api_url or os.environ.get("CODEMODE_BLAXEL_API_URL")
        # The SDK reads its credentials once, at import: give it these (one account per process).
        _settings.auth = ApiKey(CredentialsType(api_key=key, workspace=space), space, url or _settings.base_url)
        _control_plane.with_auth(_settings.auth)
        if url:
            _control_plane.with_base_url(url)
        self.image = image or os.environ.get("CODEMODE_BLAXEL_IMAGE") or DEFAULT_IMAGE
        self.memory_mb = memory_mb
        self.region = region or os.environ.get("BL_REGION") or None
        self.python = python
        self.labels = {LABEL: "1", **dict(labels or {})}
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.sync_timeout = sync_timeout

    def describe(self, handle: dict[str, Any]) -> str:
        return f"Blaxel sandbox {handle.get('sandbox', '?')}"

    # -- session operations -------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> tuple[dict[str, Any], Any]:
        name = f"codemode-{secrets.token_hex(8)}"
        request: dict[str, Any] = {
            "name": name,
            "image": self.image,
            "labels": {**spec.labels, **self.labels},
            "envs": [{"name": "PYTHONHASHSEED", "value": str(spec.hash_seed)}],
        }
        if self.memory_mb:
            request["memory"] = self.memory_mb
        if self.region:
            request["region"] = self.region
        if spec.options.network == "none":
            request["network"] = NO_NETWORK
        try:
            sandbox = await SandboxInstance.create(request)
        except BlaxelError as exc:
            raise SandboxError(f"cannot create a Blaxel sandbox ({self.image}): {exc}") from exc
        return {"sandbox": name}, sandbox

    async def start_runner(
        self, handle: dict[str, Any], sandbox: Any, spec: SandboxSpec, stdio: Stdio
    ) -> RunnerProcess:
        env = {"PYTHONHASHSEED": str(spec.hash_seed), "MALLOC_ARENA_MAX": "2", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            await sandbox.fs.write_binary(RUNNER_FILE, RUNNER_ZIP)
            await sandbox.process.exec(
                {
                    "name": RUNNER_PROCESS,
                    "command": f"exec {self.python} {RUNNER_FILE}",
                    "env": env,
                    "stdin": True,
                    "timeout": 0,  # no limit: the compute clock and RLIMIT_CPU are the code's
                    "keep_alive": False,  # a parked run lets the sandbox go to standby
                }
            )
        except BlaxelError as exc:
            raise SandboxError(f"cannot start the runner in Blaxel sandbox {handle['sandbox']}: {exc}") from exc
        handle["process"] = RUNNER_PROCESS
        return _BlaxelProcess(sandbox, RUNNER_PROCESS, stdio)

    async def reattach(self, handle: dict[str, Any], stdio: Stdio) -> RunnerProcess | None:
        name, process = handle["sandbox"], str(handle.get("process") or RUNNER_PROCESS)
        try:
            sandbox = await SandboxInstance.get(name)
            status = str(getattr(sandbox.status, "value", sandbox.status))
            if status in ("TERMINATED", "DELETING", "FAILED"):
                return None
            info = await sandbox.process.get(process)
        except BlaxelError as exc:
            if _status(exc) == 404:
                return None
            raise SandboxError(f"cannot reach Blaxel sandbox {name}: {exc}") from exc
        if str(getattr(info.status, "value", info.status)) != "running":
            return None
        return _BlaxelProcess(sandbox, process, stdio)

    async def destroy(self, handle: dict[str, Any]) -> bool:
        name = handle["sandbox"]
        try:
            await SandboxInstance.delete(name)
        except BlaxelError as exc:
            if _status(exc) == 404:
                return False
            raise SandboxError(f"cannot delete Blaxel sandbox {name}: {exc}") from exc
        return True

    async def list_own(self) -> list[OwnSandbox]:
        try:
            page = await SandboxInstance.list()
            found = [sandbox async for sandbox in page.auto_paging_iter()]
        except BlaxelError as exc:
            raise SandboxError(f"cannot list Blaxel sandboxes: {exc}") from exc
        own = []
        for sandbox in found:
            metadata = sandbox.metadata
            labels = getattr(metadata.labels, "additional_properties", None) or {}
            if labels.get(LABEL) != "1":
                continue
            created = getattr(metadata, "created_at", None)
            when = datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp() if created else 0.0
            status = str(getattr(sandbox.status, "value", sandbox.status))
            usable = status in ("DEPLOYED", "DEPLOYING", "STANDBY")
            own.append(OwnSandbox({"sandbox": metadata.name}, when, usable=usable, labels=dict(labels)))
        return own
