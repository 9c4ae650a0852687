"""``PythonRuntime``: the code runs in a fresh CPython process, jailed by bubblewrap.

Real CPython cannot be paused from outside, so it pauses itself (seed 000, step 3): the
runner (``runtimes/runner/sandbox/``, one zip) gives the code one stub per tool with the tool's
real signature, and each stub blocks on the callback channel (``runtimes/transports``)
until the host answers. The host side is the same ``CodeExecution`` as every runtime.

Checkpoints are tier 3 (``dump()`` is None): a parked or orphaned run is rebuilt by
``codemode.runtimes.journal_replay.replay`` on a fresh process from the journal of recorded results.

Limits (``ExecutionLimits``):

* ``timeout_seconds`` is compute time; time the code spends waiting for the host does not
  count. The runner's own clock (an interval timer paused during waits) raises a timeout at
  the limit with the line the code was on. Two backstops catch code that ignores it: the
  host's watchdog, a clock paused while the code is blocked on a call, kills the sandbox
  ``kill_grace`` seconds after the limit; ``RLIMIT_CPU`` kills CPU burners.
* ``max_memory_bytes`` is ``RLIMIT_DATA`` of each process: ``MemoryError`` in the code.
* ``max_tool_calls`` is counted on the host.
* ``max_stdout_bytes``: the host drains the output pipe and keeps that many bytes.

Processes (``max_processes``, ``RLIMIT_NPROC``) and file sizes (``RLIMIT_FSIZE``) are
runtime options; ``/tmp`` and ``/sandbox`` are size-capped tmpfs. Isolation: see
``runtimes/jail/bwrap.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .constraints import CodeConstraints
from .errors import CapabilityError, CodeExecutionError, SandboxError
from .jail.bwrap import (
    RUNNER_DIR_IN_SANDBOX,
    SANDBOX_HOME,
    SANDBOX_UID,
    Interpreter,
    bwrap_argv,
    find_bwrap,
    interpreter_flags,
    probe_interpreter,
    sandbox_env,
)
from .jail.seccomp import filter_program
from .jail.uids import UidLease, lease_uid
from .runner.bootstrap import build_bootstrap, runner_limits
from .runner.driver import RunnerDriver, RunnerExit, exit_error
from .runner.mounts import check_mounts
from .runner.package import compiled_runner, launch_args, runner_zip_path
from .runner.process import OutputSink, SandboxProcess, exit_signal
from .runner.runtime import RunnerRuntime
from .signatures import ToolSignature
from .transports import CallbackChannel, CallbackTransport, get_transport
from .types import CheckpointTier, Determinism, ExecutionLimits, RuntimeCapabilities, SandboxOptions
from .warm_pool import WARM_LINE, WarmInterpreter, WarmPool, warm_size_from_env

log = logging.getLogger(__name__)

Isolation = Literal["bwrap", "none"]

PYTHON_CONSTRAINTS = CodeConstraints(
    additional_instructions=(
        "This is real CPython in an isolated process: the standard library and the installed packages "
        "import normally; /tmp and the working directory are private and small; there is no network."
    )
)


def _runner_for(interpreter: Interpreter) -> os.PathLike[str]:
    """The runner's zip compiled once when the sandbox runs this interpreter, else the zip
    of its sources (``runner/package.py``)."""
    same_python = (interpreter.version, interpreter.cache_tag) == (sys.version.split()[0], sys.implementation.cache_tag)
    return compiled_runner() if same_python else runner_zip_path()


class _PythonRun(RunnerDriver):
    """The host state behind one CodeExecution: the process, its channel, the clock."""

    runtime_name = "python"

    def __init__(
        self,
        runtime: PythonRuntime,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions | None = None,
        *,
        session: bool = False,
    ) -> None:
        super().__init__(
            signatures, limits, kill_grace=runtime.kill_grace, startup_timeout=runtime.startup_timeout, session=session
        )
        self.runtime = runtime
        self.options = options or SandboxOptions()
        self._uid_lease: UidLease | None = None
        self.process: SandboxProcess | None = None
        self._workdir: str | None = None
        self._no_output = OutputSink(0)

    # -- start --------------------------------------------------------------------------

    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        rt = self.runtime
        interpreter = await rt.interpreter()
        self.channel = channel = await rt.transport.open(sandboxed=rt.isolation == "bwrap", network=rt.network)
        warm = rt.take_warm() if self._may_start_warm(channel, determinism) else None
        if warm is not None:  # its hash seed becomes the execution's (the caller records it)
            self.process, self._uid_lease, self.chosen_hash_seed = warm.process, warm.uid_lease, warm.hash_seed
            warm.process.output = OutputSink(self.limits.max_stdout_bytes)
        else:
            self.process = await self._launch(interpreter, channel, determinism.hash_seed)
        process = self.process
        channel.attach(process.proc)
        self.tasks.append(asyncio.create_task(self._watch_exit()))
        limits = runner_limits(self.limits, processes=rt.max_processes, file_bytes=rt.max_file_bytes)
        if self.session_mode:
            limits.cpu_seconds = None  # counted per cell (RLIMIT_CPU is cumulative)
        boot = build_bootstrap(
            code,
            self.signatures,
            inputs=inputs,
            limits=limits,
            transport=channel.params,
            sys_path=list(interpreter.site_packages) if rt.site_packages else [],
            determinism=determinism,
            prelude=self.prelude.source if self.prelude is not None else None,
            session=self.session_mode,
        )
        await process.send_line(boot.line())
        if not channel.uses_stdio:
            process.close_stdin()
        await self.expect_ready(rt.startup_timeout)
        if self.session_mode:
            self.clock.pause()  # idle until the first cell

    def _may_start_warm(self, channel: CallbackChannel, determinism: Determinism) -> bool:
        """A warm interpreter serves an execution's first start with nothing per execution in
        its jail: no session, no mounts, the stdio channel (``runtimes/warm_pool.py``)."""
        return (
            self.runtime.warm_pool is not None
            and determinism.hash_seed_open
            and not self.session_mode
            and not self.options.mounts
            and channel.uses_stdio
            and not channel.binds
        )

    # -- session mode ---------------------------------------------------------------------

    def reset_output(self) -> None:
        if self.process is not None:
            self.process.drain_output()  # anything left over belongs to the cell before
            self.process.output = OutputSink(self.limits.max_stdout_bytes)

    async def _launch(self, interpreter: Interpreter, channel: CallbackChannel, hash_seed: int) -> SandboxProcess:
        """Start the runner: inside bubblewrap (with the seccomp filter on an inherited
        pipe), or as a bare process in a private temporary directory."""
        rt = self.runtime
        if rt.isolation == "bwrap":
            process, self._uid_lease = await rt.spawn_jailed(
                interpreter,
                hash_seed=hash_seed,
                mounts=self.options.mounts,
                binds=channel.binds,
                protocol_on_stdout=channel.uses_stdio,
                output_limit=self.limits.max_stdout_bytes,
            )
            return process
        self._workdir = cwd = tempfile.mkdtemp(prefix="codemode-run-")
        argv = [
            interpreter.executable,
            *interpreter_flags(interpreter, hash_seed=hash_seed),
            *launch_args(_runner_for(interpreter)),
        ]
        env = sandbox_env(home=cwd, tmp=cwd, hash_seed=hash_seed)
        return await SandboxProcess.spawn(
            argv, env=env, cwd=cwd, protocol_on_stdout=channel.uses_stdio, output_limit=self.limits.max_stdout_bytes
        )

    def _release_uid(self) -> None:
        if self._uid_lease is not None:
            self._uid_lease.release()
            self._uid_lease = None

    async def _watch_exit(self) -> None:
        assert self.process is not None and self.channel is not None
        await self.process.proc.wait()
        self._release_uid()  # (bwrap waits for the runner, its only child, before it exits)
        self.channel.sandbox_exited()

    async def death_error(self) -> CodeExecutionError | SandboxError:
        """Why the process vanished without a final message."""
        assert self.process is not None
        code = await self.process.proc.wait()
        await self.process.wait_output(1.0)
        sig = exit_signal(code, bwrap=self.runtime.isolation == "bwrap")
        return exit_error(
            RunnerExit(status=code if sig is None else None, signal=sig),
            where="the sandbox",
            ready=self.ready,
            timed_out=self.timed_out,
            limits=self.limits,
            tail=self.process.output.tail(),
        )

    # -- driver hooks -------------------------------------------------------------------

    @property
    def output(self) -> OutputSink:
        return self.process.output if self.process is not None else self._no_output

    def drain_output(self) -> None:
        assert self.process is not None
        self.process.drain_output()  # what the code printed before this message

    async def wait_output(self, timeout: float) -> None:
        assert self.process is not None
        await self.process.wait_output(timeout)

    async def kill_for_timeout(self) -> None:
        assert self.process is not None
        self.process.kill()

    async def release(self) -> None:
        try:
            if self.process is not None:
                await self.process.aclose(grace=0.5 if self.done else 0.0)
        finally:
            if self.channel is not None:
                await self.channel.aclose()
            if self._workdir is not None:
                shutil.rmtree(self._workdir, ignore_errors=True)
            self._release_uid()  # (the process is gone: aclose waited for it)


class PythonRuntime(RunnerRuntime):
    """Real CPython, one fresh process per execution.

    :param transport: ``"stdio"`` (default), ``"http"`` or a ``CallbackTransport``.
    :param isolation: ``"bwrap"`` (default) or ``"none"``: no sandbox at all, the code runs
        with the worker's privileges (an explicit, loudly warned, unsafe opt-in).
    :param network: give the sandbox the host's network (off by default).
    :param python: the interpreter to run (default: this one); its installation is mounted.
    :param site_packages: make installed packages importable (site-packages on
        ``sys.path``; ``.pth`` files are not run).
    :param max_processes: ``RLIMIT_NPROC`` (processes and threads) inside the sandbox.
    :param max_file_bytes: ``RLIMIT_FSIZE``, the largest file the code can write.
    :param tmpfs_bytes: size of each private tmpfs (``/tmp``, ``/sandbox``).
    :param ro_paths: extra host paths mounted read-only at the same place (data, packages);
        a request's ``SandboxOptions.mounts`` add read-only mounts per execution.
    :param kill_grace: seconds past the time limit before the host kills the sandbox.
    """

    name = "python"
    constraints = PYTHON_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="python",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=True,
        network=False,
        checkpoint_tier=CheckpointTier.JOURNAL,
        type_checking=False,
        startup_latency_ms=40.0,
        sessions=True,
    )

    def __init__(
        self,
        *,
        transport: str | CallbackTransport = "stdio",
        isolation: Isolation = "bwrap",
        network: bool = False,
        python: str = sys.executable,
        site_packages: bool = True,
        max_processes: int = 32,
        max_file_bytes: int = 64 * 1024 * 1024,
        tmpfs_bytes: int = 64 * 1024 * 1024,
        ro_paths: Sequence[str] = (),
        startup_timeout: float = 30.0,
        kill_grace: float = 1.0,
        warm_interpreters: int | None = None,
    ) -> None:
        super().__init__()
        if isolation not in ("bwrap", "none"):
            raise ValueError(f"isolation must be 'bwrap' or 'none', not {isolation!r}")
        self.transport = get_transport(transport)
        self.isolation = isolation
        self.network = network
        self.python = python
        self.site_packages = site_packages
        self.max_processes = max_processes
        self.max_file_bytes = max_file_bytes
        self.tmpfs_bytes = tmpfs_bytes
        self.ro_paths = tuple(ro_paths)
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self.bwrap = find_bwrap() if isolation == "bwrap" else ""
        self._interpreter: Interpreter | None = None
        size = warm_size_from_env() if warm_interpreters is None else warm_interpreters
        #: Jailed interpreters started ahead of the executions that take them (bubblewrap only).
        self.warm_pool = WarmPool(self._spawn_warm, size) if size > 0 and isolation == "bwrap" else None
        if isolation == "none":
            message = (
                "PythonRuntime(isolation='none') runs untrusted code WITHOUT A SANDBOX, with the worker's "
                "user, files and network. Use it only for code you trust, never in production."
            )
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            log.warning(message)
        self.capabilities = self.capabilities.model_copy(
            update={
                "network": network or isolation == "none",
                "third_party_packages": site_packages,
                # bubblewrap binds them read-only; without it there is nothing to mount into.
                "mounts": isolation == "bwrap",
                # The network is the operator's choice (``network=``), fixed when the process
                # starts: a request may ask for it only where it is on, and never for the
                # ratchet (a bubblewrap sandbox cannot leave its network namespace while running).
                "network_policies": ("none", "full") if network or isolation == "none" else ("none",),
            }
        )

    def take_warm(self) -> WarmInterpreter | None:
        return self.warm_pool.take() if self.warm_pool is not None else None

    async def interpreter(self) -> Interpreter:
        """The interpreter the sandboxes run (probed once, in a thread: it may run it)."""
        if self._interpreter is None:
            self._interpreter = await asyncio.to_thread(probe_interpreter, self.python)
        return self._interpreter

    async def _spawn_warm(self, hash_seed: int) -> WarmInterpreter:
        interpreter = await self.interpreter()
        process, lease = await self.spawn_jailed(
            interpreter, hash_seed=hash_seed, protocol_on_stdout=True, output_limit=0, warm=True
        )
        warm = WarmInterpreter(process, hash_seed, lease)
        try:  # ready only once it has started, imported what every run needs and waits
            assert process.proc.stdout is not None
            line = await asyncio.wait_for(process.proc.stdout.readline(), self.startup_timeout)
            if line.strip() != WARM_LINE.strip():
                raise SandboxError(f"a warm interpreter said {line[:200]!r} instead of being ready")
        except BaseException:
            await warm.discard()
            raise
        return warm

    async def spawn_jailed(
        self,
        interpreter: Interpreter,
        *,
        hash_seed: int,
        mounts: Mapping[str, str] | None = None,
        binds: Sequence[tuple[str, str]] = (),
        protocol_on_stdout: bool,
        output_limit: int,
        warm: bool = False,
    ) -> tuple[SandboxProcess, UidLease | None]:
        """The runner inside bubblewrap, with the seccomp filter on an inherited pipe and, as
        root, a uid of its own (``RLIMIT_NPROC`` is per uid); ``warm``: it imports what every
        run needs before it reads its bootstrap."""
        pass_fds: list[int] = []
        program = filter_program()
        if program is not None:
            read_end, write_end = os.pipe()
            os.write(write_end, program)  # a few hundred bytes: fits in the pipe
            os.close(write_end)
            pass_fds.append(read_end)
        lease = lease_uid(SANDBOX_UID) if os.geteuid() == 0 else None
        try:
            argv = bwrap_argv(
                bwrap=self.bwrap,
                interpreter=interpreter,
                runner=_runner_for(interpreter),
                ro_paths=self.ro_paths,
                mounts=mounts,
                binds=binds,
                network=self.network,
                tmp_bytes=self.tmpfs_bytes,
                home_bytes=self.tmpfs_bytes,
                seccomp_fd=pass_fds[0] if pass_fds else None,
                hash_seed=hash_seed,
                uid=lease.uid if lease else SANDBOX_UID,
                command_args=["--warm"] if warm else (),
            )
            process = await SandboxProcess.spawn(
                argv,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                cwd="/",
                protocol_on_stdout=protocol_on_stdout,
                output_limit=output_limit,
                pass_fds=pass_fds,
                supervised=True,
            )
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        finally:
            for fd in pass_fds:
                os.close(fd)
        return process, lease

    async def aclose(self) -> None:
        if self.warm_pool is not None:
            await self.warm_pool.aclose()
        await super().aclose()

    def new_run(
        self,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        session: bool = False,
    ) -> _PythonRun:
        """A runner process; in session mode it serves cells until it dies with this worker
        (there is no state to restore a process from: a lost session is rebuilt by replaying
        its cells)."""
        return _PythonRun(self, signatures, limits, options, session=session)

    def check_session(self) -> None:
        if self.transport.name != "stdio":
            raise CapabilityError(f"sessions need the stdio transport, not {self.transport.name!r}")

    def check_options(self, options: SandboxOptions | None) -> SandboxOptions:
        """What the capabilities refuse (the ratchet, network where the operator gave none),
        and mounts bubblewrap cannot make (see ``check_mounts``)."""
        options = super().check_options(options)
        check_mounts(options.mounts, reserved=("/usr", SANDBOX_HOME, RUNNER_DIR_IN_SANDBOX))
        return options
