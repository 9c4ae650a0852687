"""``E2BRuntime``: the code runs in an E2B cloud sandbox, and the sandbox is the checkpoint.

The code runs in our standard-library runner (one zip, ``runtimes/runner/package.py``, the one
the python runtime uses), uploaded into a fresh sandbox and started with
``commands.run(..., background=True, stdin=True, timeout=0)``. Tool calls travel over that
process's stdout and stdin through E2B's own API (``runtimes/transports/command.py``):
nothing listens in the sandbox and no credential or host address enters it; the bootstrap
carries the code, its inputs and the tool stubs. The lifecycle (attach, park, re-attach
and sync, replay when the sandbox is gone) is every provider's (``runtimes/runner/provider.py``);
this module holds E2B's session operations.

Checkpoints are tier 2. ``dump()`` is a small versioned blob naming the sandbox, the
runner's pid and where the runner is (the calls it made, the ones it waits for).
``restore(blob)`` on any worker reconnects (``AsyncSandbox.connect`` resumes a paused
sandbox), re-attaches to the runner (``commands.connect(pid)``) and asks it where it is
(the runner protocol's ``sync``): output emitted while nobody was attached is lost, so a
runner that moved on is not trusted. When the sandbox or the process is gone or out of
step, ``restore`` kills what is left and returns None; the caller rebuilds the run by
journal replay (``runtimes/journal_replay.py``) in a fresh sandbox.

* ``suspend(blob)``: detach this worker's handles, then pause the sandbox (memory and
  processes kept, no compute billed). ``discard(blob)``: kill it (idempotent).
* The sandbox is created with ``on_timeout="pause"`` (``auto_pause``): one left running
  past ``sandbox_timeout`` while a long tool runs is paused, not lost, and the next step
  resumes it; a run whose steps keep coming pushes the timeout back (``keep_alive``).

Settings: ``E2B_API_KEY`` (required; a missing key is an error at construction) and the
SDK's usual variables (``E2B_DOMAIN``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``), or the same
as arguments. Requires PyPI ``e2b-code-interpreter``.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
from collections.abc import Mapping
from datetime import datetime
from typing import Any

try:
    import e2b_code_interpreter as _sdk
    from e2b import CommandExitException, NotFoundException, SandboxException, SandboxNotFoundException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the e2b runtime needs the E2B SDK: pip install 'durable-codemode[e2b]' "
        "(or pip install 'e2b-code-interpreter>=2,<3'), and E2B_API_KEY set"
    ) from exc

from .constraints import CodeConstraints
from .errors import SandboxError
from .runner.driver import RunnerExit
from .runner.provider import OwnSandbox, RunnerProcess, SandboxSpec, Stdio
from .runner.sandbox_run import RUNNER_ZIP
from .runner.sandbox_runtime import SandboxRuntime
from .types import CheckpointTier, RuntimeCapabilities

log = logging.getLogger(__name__)

#: Where the runner is uploaded, relative to the sandbox user's home.
RUNNER_FILE = ".codemode/runner.zip"

E2B_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in a remote E2B sandbox: the standard library and the sandbox's installed "
        "packages import normally and the files are the sandbox's own. Randomness is seeded per execution; "
        "call a tool when you need the real current time."
    )
)

#: envd's end-of-process errors for signals ("signal: killed").
_SIGNALS = {"killed": signal.SIGKILL, "terminated": signal.SIGTERM, "aborted": signal.SIGABRT}


class E2BSettingsError(ValueError):
    """The runtime cannot be used as configured (no API key): nothing was started."""


def _missing_key_message() -> str:
    return (
        "E2BRuntime needs an E2B API key: set E2B_API_KEY (from https://e2b.dev/dashboard) or pass "
        "api_key=...; for a self-hosted or local E2B also set E2B_API_URL and E2B_SANDBOX_URL"
    )


def command_exit(exit_code: int, error: str | None) -> RunnerExit:
    """envd's end of a command as a ``RunnerExit``."""
    if error and error.startswith("signal: "):
        name = error.split(": ", 1)[1].strip()
        sig = _SIGNALS.get(name) or getattr(signal, "SIG" + name.upper(), None)
        return RunnerExit(signal=int(sig) if sig is not None else None, detail=error)
    return RunnerExit(status=exit_code, detail=error or "")


class _E2BProcess(RunnerProcess):
    """The runner as a background command of the sandbox, attached through envd."""

    def __init__(self, sandbox: Any, command: Any, pid: int) -> None:
        self.sandbox = sandbox
        self.command = command
        self.pid = pid

    async def write(self, data: bytes) -> None:
        await self.sandbox.commands.send_stdin(self.pid, data)

    async def wait(self) -> RunnerExit:
        try:
            await self.command.wait()
        except CommandExitException as exc:
            return command_exit(exc.exit_code, exc.error)
        except Exception as exc:  # paused, killed, network: the process may well be alive
            return RunnerExit(lost=str(exc) or type(exc).__name__)
        return RunnerExit(status=0)

    async def kill(self) -> None:
        await self.sandbox.commands.kill(self.pid)

    async def close(self) -> None:
        await self.command.disconnect()


class E2BRuntime(SandboxRuntime):
    """Real CPython in an E2B sandbox, one sandbox per execution; checkpoints are the
    paused sandbox itself.

    :param template: sandbox template (default: the code interpreter's ``code-interpreter-v1``).
    :param sandbox_timeout: seconds a running sandbox lives without a step (E2B's timeout);
        at the end it is paused (``auto_pause``) or killed.
    :param internet_access: let the sandbox reach the internet (off by default, like the
        python runtime: tools are the code's way out).
    :param envs: environment variables of the sandbox (never put credentials here: the
        code can read them).
    :param api_key: E2B API key (default: ``E2B_API_KEY``); ``api_url``, ``sandbox_url``,
        ``domain`` override ``E2B_API_URL``, ``E2B_SANDBOX_URL``, ``E2B_DOMAIN``.
    :param python: the interpreter in the sandbox (``bash -l`` resolves it on the standard PATH).
    :param metadata: E2B metadata on every sandbox (``codemode=1`` is always set).
    :param auto_pause: pause rather than kill a sandbox that reaches ``sandbox_timeout``.
    :param sync_timeout: seconds a re-attached runner has to say where it is.
    """

    name = "e2b"
    constraints = E2B_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="e2b",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=True,
        network=False,
        checkpoint_tier=CheckpointTier.SESSION,
        type_checking=False,
        startup_latency_ms=500.0,
        sessions=True,
    )
    handle_keys = ("sandbox_id", "pid")
    parks_as = "paused"

    def __init__(
        self,
        *,
        template: str | None = None,
        sandbox_timeout: int = 600,
        internet_access: bool = False,
        envs: Mapping[str, str] | None = None,
        api_key: str | None = None,
        api_url: str | None = None,
        sandbox_url: str | None = None,
        domain: str | None = None,
        python: str = "python3",
        metadata: Mapping[str, str] | None = None,
        auto_pause: bool = True,
        startup_timeout: float = 60.0,
        kill_grace: float = 1.0,
        sync_timeout: float = 10.0,
    ) -> None:
        super().__init__()
        key = api_key or os.environ.get("E2B_API_KEY")
        if not key:
            raise E2BSettingsError(_missing_key_message())
        params: dict[str, Any] = {"api_key": key}
        for name, value in (("api_url", api_url), ("sandbox_url", sandbox_url), ("domain", domain)):
            if value:
                params[name] = value
        self.Sandbox = _sdk.E2B(**params).AsyncSandbox
        self.template = template or self.Sandbox.default_template
        self.sandbox_timeout = int(sandbox_timeout)
        self.keep_alive_seconds = self.sandbox_timeout / 2
        self.internet_access = internet_access
        self.envs = dict(envs or {})
        self.python = python
        self.metadata = {"codemode": "1", **dict(metadata or {})}
        self.auto_pause = auto_pause
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.sync_timeout = sync_timeout
        self.capabilities = self.capabilities.model_copy(update={"network": internet_access})

    def describe(self, handle: dict[str, Any]) -> str:
        return f"E2B sandbox {handle.get('sandbox_id', '?')}"

    # -- session operations -------------------------------------------------------------

    async def create(self, spec: SandboxSpec) -> tuple[dict[str, Any], Any]:
        try:
            sandbox = await self.Sandbox.create(
                template=self.template,
                timeout=self.sandbox_timeout,
                metadata={**spec.labels, **self.metadata},
                envs=self.envs or None,
                allow_internet_access=self.internet_access,
                lifecycle={"on_timeout": "pause"} if self.auto_pause else None,
            )
        except SandboxException as exc:
            raise SandboxError(f"cannot create an E2B sandbox ({self.template}): {exc}") from exc
        return {"sandbox_id": sandbox.sandbox_id}, sandbox

    async def start_runner(
        self, handle: dict[str, Any], sandbox: Any, spec: SandboxSpec, stdio: Stdio
    ) -> RunnerProcess:
        written = await sandbox.files.write(RUNNER_FILE, RUNNER_ZIP)
        envs = {"PYTHONHASHSEED": str(spec.hash_seed), "MALLOC_ARENA_MAX": "2", "PYTHONDONTWRITEBYTECODE": "1"}
        # Not -I: PYTHONHASHSEED must be read, and the sandbox's own environment (its
        # packages, PYTHONPATH) is the code's to use; the sandbox is the isolation.
        command = await sandbox.commands.run(
            f"exec {self.python} {shlex.quote(written.path)}",
            background=True,
            stdin=True,
            timeout=0,  # the default 60 s would have envd kill the runner (E2B#1074)
            envs=envs,
            on_stdout=stdio.on_stdout,
            on_stderr=stdio.on_stderr,
        )
        handle["pid"] = command.pid
        return _E2BProcess(sandbox, command, command.pid)

    async def reattach(self, handle: dict[str, Any], stdio: Stdio) -> RunnerProcess | None:
        sandbox_id, pid = handle["sandbox_id"], int(handle["pid"])
        try:
            sandbox = await self.Sandbox.connect(sandbox_id, timeout=self.sandbox_timeout)
        except SandboxNotFoundException:
            return None
        except SandboxException as exc:
            raise SandboxError(f"cannot reach E2B sandbox {sandbox_id}: {exc}") from exc
        try:
            command = await sandbox.commands.connect(
                pid, timeout=0, on_stdout=stdio.on_stdout, on_stderr=stdio.on_stderr
            )
        except NotFoundException:
            return None
        except SandboxException as exc:
            raise SandboxError(f"cannot re-attach to the runner in E2B sandbox {sandbox_id}: {exc}") from exc
        return _E2BProcess(sandbox, command, pid)

    async def pause(self, handle: dict[str, Any]) -> None:
        try:
            await self.Sandbox.pause(handle["sandbox_id"])  # False when already paused
        except SandboxNotFoundException:
            pass  # gone: the next step replays
        except SandboxException as exc:
            raise SandboxError(f"cannot pause E2B sandbox {handle['sandbox_id']}: {exc}") from exc

    async def destroy(self, handle: dict[str, Any]) -> bool:
        sandbox_id = handle["sandbox_id"]
        try:
            return bool(await self.Sandbox.kill(sandbox_id))
        except SandboxNotFoundException:
            return False
        except SandboxException as exc:
            raise SandboxError(f"cannot kill E2B sandbox {sandbox_id}: {exc}") from exc

    async def keep_alive(self, handle: dict[str, Any]) -> None:
        try:
            await self.Sandbox.set_timeout(handle["sandbox_id"], self.sandbox_timeout)
        except SandboxException as exc:
            raise SandboxError(f"cannot extend E2B sandbox {handle['sandbox_id']}: {exc}") from exc

    async def list_own(self) -> list[OwnSandbox]:
        from e2b import SandboxQuery

        try:
            found = await self.Sandbox.list(query=SandboxQuery(metadata={"codemode": "1"})).next_items()
        except SandboxException as exc:
            raise SandboxError(f"cannot list E2B sandboxes: {exc}") from exc
        return [
            OwnSandbox(
                {"sandbox_id": info.sandbox_id},
                info.started_at.timestamp() if isinstance(info.started_at, datetime) else 0.0,
                usable=True,  # running or paused: either may hold a parked run
                labels=dict(info.metadata or {}),
            )
            for info in found
        ]
