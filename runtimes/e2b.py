"""``E2BRuntime``: the code runs in an E2B cloud sandbox, and the sandbox is the checkpoint.

The code runs in our standard-library runner (``runtimes/runner/in_sandbox.py``, the one the
python runtime uses), uploaded into a fresh sandbox and started with
``commands.run(..., background=True, stdin=True, timeout=0)``. Tool calls travel over that
process's stdout and stdin through E2B's own API (``runtimes/transports/command.py``):
nothing listens in the sandbox and no credential or host address enters it; the bootstrap
carries the code, its inputs and the tool stubs. Protocol, limits, output capture, error
mapping and concurrency are the python runtime's (``runtimes/runner/driver.py``).

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
* ``close()`` of a handle whose checkpoint is still current (dumped or restored and not
  advanced since) only detaches: another worker may restore that checkpoint. ``close()``
  after the result, an error, or an advance beyond the last checkpoint kills the sandbox.
* A handle kept after ``dump()`` (a worker's cache) stays attached and is used as is when
  nothing arrived since; if its stream dropped (a pause) or something else drove the
  runner, its next use re-attaches and syncs like a restore, and fails with
  ``SandboxError`` when the runner moved on.
* The sandbox is created with ``on_timeout="pause"`` (``auto_pause``): one left running
  past ``sandbox_timeout`` while a long tool runs is paused, not lost, and the next step
  resumes it.

Settings: ``E2B_API_KEY`` (required; a missing key is an error at construction) and the
SDK's usual variables (``E2B_DOMAIN``, ``E2B_API_URL``, ``E2B_SANDBOX_URL``), or the same
as arguments. Requires PyPI ``e2b-code-interpreter``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shlex
import time
from collections.abc import Mapping
from typing import Any

try:
    import e2b_code_interpreter as _sdk
    from e2b import CommandExitException, NotFoundException, SandboxException, SandboxNotFoundException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the e2b runtime needs the E2B SDK: pip install 'durable-codemode[e2b]' "
        "(or pip install 'e2b-code-interpreter>=2,<3'), and E2B_API_KEY set"
    ) from exc

from .base import CodeRuntime
from .checkpoint import decode_checkpoint, encode_checkpoint
from .constraints import CodeConstraints
from .errors import CodeExecutionError, CodeResourceError, CodeRuntimeError, CodeTimeoutError, SandboxError
from .execution import CallOutcome, CodeExecution, Step
from .runner.bootstrap import RUNNER_PATH, build_bootstrap, cell_message, runner_limits
from .runner.driver import RunnerDriver
from .runner.process import OutputSink
from .session import CodeSession
from .signatures import FunctionsSpec, ToolSignature, normalize_functions
from .transports.command import CommandChannel
from .transports.protocol import SyncedMessage
from .types import CheckpointTier, Determinism, ExecutionLimits, FunctionCall, RuntimeCapabilities, SandboxOptions

log = logging.getLogger(__name__)

_RUNNER_SOURCE = RUNNER_PATH.read_bytes()
#: Checkpoints name the blob format and the runner they talk to: a checkpoint taken with
#: another runner is refused (replay), never resumed with a host that speaks differently.
E2B_CHECKPOINT_VERSION = "1-" + hashlib.sha256(_RUNNER_SOURCE).hexdigest()[:12]
#: Where the runner is uploaded, relative to the sandbox user's home.
RUNNER_FILE = ".codemode/runner.py"

E2B_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in a remote E2B sandbox: the standard library and the sandbox's installed "
        "packages import normally and the files are the sandbox's own. Randomness is seeded per execution; "
        "call a tool when you need the real current time."
    )
)


class E2BSettingsError(ValueError):
    """The runtime cannot be used as configured (no API key): nothing was started."""


def _missing_key_message() -> str:
    return (
        "E2BRuntime needs an E2B API key: set E2B_API_KEY (from https://e2b.dev/dashboard) or pass "
        "api_key=...; for a self-hosted or local E2B also set E2B_API_URL and E2B_SANDBOX_URL"
    )


class _E2BRun(RunnerDriver):
    """One execution in one sandbox, seen from this worker."""

    runtime_name = "e2b"

    def __init__(
        self,
        runtime: E2BRuntime,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        *,
        stdout_before: int = 0,
        session: bool = False,
    ) -> None:
        super().__init__(signatures, limits, kill_grace=runtime.kill_grace, session=session)
        #: Session mode: cells begun in this runner (the runner's ``sync`` reports the same).
        self.cells = 0
        self.runtime = runtime
        self.sink = OutputSink(max(0, limits.max_stdout_bytes - stdout_before))
        self.stdout_before = stdout_before
        self.sandbox: Any = None
        self.sandbox_id = ""
        self.pid = 0
        self.handle: Any = None
        self.channel: CommandChannel = CommandChannel(on_output=self._on_output)
        self.ended = asyncio.Event()  # the process's end event arrived (all its output with it)
        self.exit: tuple[int, str | None] | None = None
        self.lost: BaseException | None = None  # the stream dropped without an end event
        self.attached = False
        #: The last checkpoint taken (or restored) is still where the runner is.
        self.parked = False
        self.discarded = False
        #: False once another handle drove the runner past this one's checkpoint: closing
        #: it must not kill a sandbox someone else is using.
        self.owned = True
        self._ttl_set = time.monotonic()  # when the sandbox's timeout was last pushed back
        self._watcher: asyncio.Task[None] | None = None

    def _on_output(self, text: str) -> None:
        self.sink.feed(text.encode("utf-8", "replace"))

    # -- start --------------------------------------------------------------------------

    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        rt = self.runtime
        self.sandbox = await rt.create_sandbox()
        self.sandbox_id = self.sandbox.sandbox_id
        self._ttl_set = time.monotonic()
        written = await self.sandbox.files.write(RUNNER_FILE, _RUNNER_SOURCE)
        # The sandbox is the isolation: no process or file-size caps (the sandbox user's
        # other processes count towards RLIMIT_NPROC); memory and CPU as everywhere.
        limits = runner_limits(self.limits, processes=None, file_bytes=None)
        if self.session_mode:
            limits.cpu_seconds = None  # counted per cell (RLIMIT_CPU is cumulative)
        boot = build_bootstrap(
            code,
            self.signatures,
            inputs=inputs,
            limits=limits,
            transport=self.channel.params,
            sys_path=[],
            determinism=determinism,
            output_marks=True,
            session=self.session_mode,
        )
        envs = {"PYTHONHASHSEED": str(determinism.hash_seed), "MALLOC_ARENA_MAX": "2", "PYTHONDONTWRITEBYTECODE": "1"}
        # Not -I: PYTHONHASHSEED must be read, and the sandbox's own environment (its
        # packages, PYTHONPATH) is the code's to use; the sandbox is the isolation.
        command = f"exec {rt.python} {shlex.quote(written.path)}"
        self.handle = await self.sandbox.commands.run(
            command,
            background=True,
            stdin=True,
            timeout=0,  # the default 60 s would have envd kill the runner (E2B#1074)
            envs=envs,
            on_stdout=self.channel.feed_stdout,
            on_stderr=self.channel.feed_stderr,
        )
        self.pid = self.handle.pid
        self._attach(self.handle)
        await self.channel.send(boot.model_dump(mode="json"), fresh_line=False)
        await self.expect_ready(rt.startup_timeout, "the E2B sandbox's runner")
        if self.session_mode:
            self.clock.pause()  # idle until the first cell

    # -- session mode ---------------------------------------------------------------------

    async def run_cell(self, code: str, functions: FunctionsSpec, inputs: Mapping[str, Any] | None) -> CodeExecution:
        if self.parked:
            await self._unpark()
        await self._keep_alive()
        signatures = normalize_functions(functions)
        self.begin_cell(signatures, self.limits)
        self.cells += 1
        try:
            await self.channel.send(cell_message(code, signatures, inputs=inputs, limits=self.limits))
            await self.expect_ready(self.runtime.startup_timeout, "the session's next cell")
        except CodeExecutionError:
            raise  # the cell cannot start (syntax): the session is as it was
        except BaseException:
            await self.close()
            raise
        return self.cell_execution(dump=self.dump)

    def reset_output(self) -> None:
        self.sink = OutputSink(self.limits.max_stdout_bytes)
        self.stdout_before = 0

    async def session_variables(self) -> dict[str, str]:
        return dict(self.variables)

    async def session_dump(self) -> bytes:
        return self.dump()

    def session(self) -> CodeSession:
        return CodeSession(
            runtime="e2b",
            run_cell=self.run_cell,
            dump=self.session_dump,
            variables=self.session_variables,
            close=self.close,
            alive=lambda: not self.closed,
            busy=lambda: self.cell_open,
        )

    def _attach(self, handle: Any) -> None:
        self.handle = handle
        self.attached = True
        self.ended.clear()
        self.channel.bind(lambda data: self.sandbox.commands.send_stdin(self.pid, data))
        self._watcher = asyncio.create_task(self._watch(handle))

    async def _watch(self, handle: Any) -> None:
        """Learn how the command's stream ended: the process exited, or the stream dropped."""
        try:
            await handle.wait()
            self.exit = (0, None)
        except CommandExitException as exc:
            self.exit = (exc.exit_code, exc.error)
        except asyncio.CancelledError:
            if self.attached:  # cancelled by someone other than detach(): pass it on
                raise
            return
        except Exception as exc:  # paused, killed, network: the process may well be alive
            self.lost = exc
        self.attached = False
        self.ended.set()
        self.channel.sandbox_exited()

    async def detach(self) -> None:
        """Stop receiving the runner's events; the process keeps running (or waiting)."""
        handle, self.handle = self.handle, None
        self.attached = False
        if handle is not None:
            with contextlib.suppress(Exception):
                await handle.disconnect()
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None

    # -- restore ------------------------------------------------------------------------

    async def reattach(self, *, connect: bool) -> str:
        """Attach to the runner again and check it is where the checkpoint says (``calls``
        issued, waiting on exactly the pending ones). Returns ``"in_step"``, ``"gone"``
        (the sandbox or the process), ``"silent"`` (no answer to the sync) or
        ``"moved_on"`` (another handle drove it further: what it emitted meanwhile is lost)."""
        rt = self.runtime
        if connect:
            try:
                self.sandbox = await rt.Sandbox.connect(self.sandbox_id, timeout=rt.sandbox_timeout)
            except SandboxNotFoundException:
                return "gone"
            except SandboxException as exc:
                raise SandboxError(f"cannot reach E2B sandbox {self.sandbox_id}: {exc}") from exc
            self._ttl_set = time.monotonic()
        self.channel.reset()
        self.lost = None
        try:
            handle = await self.sandbox.commands.connect(
                self.pid, timeout=0, on_stdout=self.channel.feed_stdout, on_stderr=self.channel.feed_stderr
            )
        except NotFoundException:
            return "gone"
        except SandboxException as exc:
            raise SandboxError(f"cannot re-attach to the runner in E2B sandbox {self.sandbox_id}: {exc}") from exc
        self._attach(handle)
        nonce = secrets.token_hex(8)
        try:
            await self.channel.send({"type": "sync", "nonce": nonce})
            reply = await asyncio.wait_for(self.receive(), rt.sync_timeout)
        except (SandboxError, CodeExecutionError, asyncio.TimeoutError) as exc:
            log.info("E2B sandbox %s: no answer to sync (%s)", self.sandbox_id, exc)
            return "silent"
        if reply is None:
            return "gone"  # the process ended (its end event was still retained)
        if not isinstance(reply, SyncedMessage) or reply.nonce != nonce:
            log.info("E2B sandbox %s: runner sent %r instead of its position", self.sandbox_id, reply)
            return "moved_on"
        expected = set(self.outstanding)
        if reply.calls != self.tool_calls or set(reply.waiting) != expected or reply.cells != self.cells:
            log.info(
                "E2B sandbox %s: runner is at %d calls waiting on %s, the checkpoint at %d waiting on %s",
                self.sandbox_id, reply.calls, reply.waiting, self.tool_calls, sorted(expected),
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
        state = await self.reattach(connect=True)
        if state != "in_step":
            if state == "moved_on":
                self.owned = False  # someone else drives it: closing this handle must not kill it
            await self.detach()
            raise SandboxError(
                f"E2B sandbox {self.sandbox_id} is {'ahead of' if state == 'moved_on' else 'lost to'} this "
                "checkpoint: restore the current checkpoint (or replay the journal) instead"
            )

    # -- driver hooks -------------------------------------------------------------------

    @property
    def output(self) -> OutputSink:
        return self.sink

    async def wait_output(self, timeout: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ended.wait(), timeout)

    async def death_error(self) -> CodeExecutionError | SandboxError:
        await self.wait_output(1.0)
        tail = self.sink.tail()
        if self.exit is None:
            return SandboxError(f"lost the connection to the runner in E2B sandbox {self.sandbox_id}: {self.lost}")
        code, error = self.exit
        if not self.ready:
            return SandboxError(
                f"the runner in E2B sandbox {self.sandbox_id} exited ({error or code}) before the code started: "
                f"{tail or 'no output'}"
            )
        limit = self.limits.timeout_seconds
        if self.timed_out:
            return CodeTimeoutError(
                f"the code exceeded its time limit of {limit:g} s and was killed", error_type="TimeoutError"
            )
        if error and error.startswith("signal: killed"):
            return CodeResourceError(
                "the code's process was killed (SIGKILL): it exceeded its CPU time or the sandbox ran out of memory",
                error_type="ResourceError",
                traceback=tail or None,
            )
        if error and error.startswith("signal"):
            return CodeRuntimeError(f"the code's process died ({error})", error_type="Crash", traceback=tail or None)
        return CodeRuntimeError(
            f"the code ended the interpreter (exit status {code}) before finishing",
            error_type="SystemExit",
            traceback=tail or None,
        )

    async def kill_for_timeout(self) -> None:
        with contextlib.suppress(Exception):
            await self.sandbox.commands.kill(self.pid)

    async def advance(self) -> Step:
        if self.parked:
            await self._unpark()
        await self._keep_alive()
        return await super().advance()

    async def _keep_alive(self) -> None:
        """Push the sandbox's timeout back when half of it has gone by, so a run whose
        steps keep coming never reaches it (a run that stops coming is paused at it)."""
        rt = self.runtime
        if time.monotonic() - self._ttl_set < rt.sandbox_timeout / 2 or self.sandbox is None:
            return
        self._ttl_set = time.monotonic()
        try:
            await self.sandbox.set_timeout(rt.sandbox_timeout)
        except SandboxException as exc:  # the step itself will tell if the sandbox is gone
            log.info("E2B sandbox %s: could not extend its timeout: %s", self.sandbox_id, exc)

    async def answer(self, call_id: str, outcome: CallOutcome) -> None:
        if self.parked and not self.closed:
            await self._unpark()
        await super().answer(call_id, outcome)

    async def release(self) -> None:
        # A session between cells has ended its last cell (maybe with an error of its code):
        # its sandbox is kept like a parked run's.
        ended_cell = self.session_mode and not self.cell_open
        keep = self.parked and (self.failed is None or ended_cell) and not self.done and not self.discarded
        try:
            await self.detach()
            if not keep and self.owned and self.sandbox_id:
                try:
                    await self.runtime.kill_sandbox(self.sandbox_id)
                except SandboxError as exc:  # close() runs in finally blocks: never mask the cause
                    log.warning("%s", exc)
        finally:
            self.runtime._live.discard(self)

    # -- checkpoint ---------------------------------------------------------------------

    def dump(self) -> bytes:
        self.parked = True
        meta = {
            "sandbox_id": self.sandbox_id,
            "pid": self.pid,
            "calls": self.tool_calls,
            "pending": [c.model_dump(mode="json") for c in self.outstanding.values()],
            "blocked_on": list(self.blocked_on),
            "limits": self.limits.model_dump(mode="json"),
            "compute_seconds": self.clock.elapsed(),
            "stdout_bytes": self.stdout_before + len(self.sink.data),
        }
        if self.session_mode:
            meta["session"] = {"cells": self.cells, "open": self.cell_open, "variables": self.variables}
        return encode_checkpoint("e2b", E2B_CHECKPOINT_VERSION, meta, b"")

    @classmethod
    def from_checkpoint(cls, runtime: E2BRuntime, meta: Mapping[str, Any]) -> _E2BRun:
        limits = ExecutionLimits.model_validate(meta["limits"])
        session = meta.get("session")
        run = cls(runtime, {}, limits, stdout_before=int(meta.get("stdout_bytes", 0)), session=isinstance(session, dict))
        if isinstance(session, dict):
            run.cells = int(session.get("cells", 0))
            run.cell_open = bool(session.get("open"))
            run.variables = {str(k): str(v) for k, v in dict(session.get("variables") or {}).items()}
        run.sandbox_id = str(meta["sandbox_id"])
        run.pid = int(meta["pid"])
        run.tool_calls = int(meta["calls"])
        run.seen = {str(i) for i in range(1, run.tool_calls + 1)}  # the runner numbers calls 1, 2, ...
        pending = [FunctionCall.model_validate(c) for c in meta["pending"]]
        run.outstanding = {c.call_id: c for c in pending}
        run.blocked_on = tuple(str(i) for i in meta.get("blocked_on", ()))
        run.clock.used = float(meta.get("compute_seconds", 0.0))
        run.ready = True
        return run


class E2BRuntime(CodeRuntime):
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
        self.internet_access = internet_access
        self.envs = dict(envs or {})
        self.python = python
        self.metadata = {"codemode": "1", **dict(metadata or {})}
        self.auto_pause = auto_pause
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.sync_timeout = sync_timeout
        self.capabilities = self.capabilities.model_copy(update={"network": internet_access})
        self._live: set[_E2BRun] = set()

    # -- sandboxes ----------------------------------------------------------------------

    async def create_sandbox(self) -> Any:
        try:
            return await self.Sandbox.create(
                template=self.template,
                timeout=self.sandbox_timeout,
                metadata=self.metadata,
                envs=self.envs or None,
                allow_internet_access=self.internet_access,
                lifecycle={"on_timeout": "pause"} if self.auto_pause else None,
            )
        except SandboxException as exc:
            raise SandboxError(f"cannot create an E2B sandbox ({self.template}): {exc}") from exc

    async def kill_sandbox(self, sandbox_id: str) -> bool:
        """Kill a sandbox; False when it was already gone."""
        try:
            return bool(await self.Sandbox.kill(sandbox_id))
        except SandboxNotFoundException:
            return False
        except SandboxException as exc:
            raise SandboxError(f"cannot kill E2B sandbox {sandbox_id}: {exc}") from exc

    def _decode(self, checkpoint: bytes) -> dict[str, Any] | None:
        decoded = decode_checkpoint(checkpoint, "e2b", E2B_CHECKPOINT_VERSION)
        if decoded is None:
            return None
        meta = decoded[0]
        if not isinstance(meta, dict) or not meta.get("sandbox_id"):
            return None
        return meta

    def _local_runs(self, sandbox_id: str) -> list[_E2BRun]:
        return [run for run in self._live if run.sandbox_id == sandbox_id]

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
        self.check_options(options)
        run = _E2BRun(self, normalize_functions(functions), limits or ExecutionLimits())
        self._live.add(run)
        try:
            await run.start(code, inputs, determinism or Determinism.derived(code, inputs))
        except BaseException:
            await run.close()
            raise
        return run.execution(dump=run.dump)

    async def type_check(self, code: str, signatures: FunctionsSpec) -> None:
        """No static type checking; a syntax check here, without a sandbox."""
        from .python import PythonRuntime

        await PythonRuntime.type_check(self, code, signatures)  # type: ignore[arg-type]

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        meta = self._decode(checkpoint)
        if meta is None:
            return None
        try:
            run = _E2BRun.from_checkpoint(self, meta)
        except (KeyError, TypeError, ValueError):
            log.warning("refusing an E2B checkpoint with an unreadable header")
            return None
        self._live.add(run)
        try:
            state = await run.reattach(connect=True)
        except BaseException:
            self._live.discard(run)
            await run.detach()
            raise
        if state != "in_step":
            # Whatever is left cannot continue this run: the caller replays in a fresh sandbox.
            log.info("E2B sandbox %s cannot continue this checkpoint (%s): killing it", run.sandbox_id, state)
            run.discarded = True
            await run.close()  # kills the sandbox
            return None
        run.parked = True
        run.start_watchdog()
        if run.session_mode:  # a cell of a session: the session goes on after it
            execution = run.cell_execution(dump=run.dump, pending=list(run.outstanding.values()))
            execution.session = run.session()
            return execution
        return run.execution(dump=run.dump, pending=list(run.outstanding.values()))

    async def open_session(
        self,
        *,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        state: bytes | None = None,
    ) -> CodeSession | None:
        """A sandbox whose runner serves one cell after another. ``state`` (a dump between
        cells) names a sandbox: reconnected (resumed when paused) and checked like a restored
        checkpoint; None when it is gone or out of step (the caller replays the cells)."""
        self.check_options(options)
        if state is None:
            run = _E2BRun(self, {}, limits or ExecutionLimits(), session=True)
            self._live.add(run)
            try:
                await run.start("", None, determinism or Determinism.derived("", None))
            except BaseException:
                await run.close()
                raise
            return run.session()
        meta = self._decode(state)
        if meta is None or not isinstance(meta.get("session"), dict) or meta["session"].get("open"):
            return None
        try:
            run = _E2BRun.from_checkpoint(self, meta)
        except (KeyError, TypeError, ValueError):
            log.warning("refusing an E2B session state with an unreadable header")
            return None
        self._live.add(run)
        try:
            found = await run.reattach(connect=True)
        except BaseException:
            self._live.discard(run)
            await run.detach()
            raise
        if found != "in_step":
            log.info("E2B sandbox %s cannot continue this session (%s): killing it", run.sandbox_id, found)
            run.discarded = True
            await run.close()
            return None
        run.parked = True
        run.start_watchdog()
        return run.session()

    async def suspend(self, checkpoint: bytes) -> None:
        """Pause the sandbox (detaching this worker's handles first: a stream attached
        through a pause wedges envd's output, E2B#1587)."""
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(meta["sandbox_id"]):
            await run.detach()
            if not run.parked:  # it ran past this checkpoint: it cannot go on after the pause
                run.lost = SandboxError("the sandbox was paused under this handle")
                run.channel.sandbox_exited()
        try:
            await self.Sandbox.pause(meta["sandbox_id"])  # False when already paused
        except SandboxNotFoundException:
            pass  # gone: the next step replays
        except SandboxException as exc:
            raise SandboxError(f"cannot pause E2B sandbox {meta['sandbox_id']}: {exc}") from exc

    async def discard(self, checkpoint: bytes) -> None:
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(meta["sandbox_id"]):
            run.discarded = True
            await run.close()
        await self.kill_sandbox(meta["sandbox_id"])

    async def aclose(self) -> None:
        """Close every handle of this runtime: kill their sandboxes, except those whose
        checkpoint is current (they are only detached)."""
        for run in list(self._live):
            await run.close()
