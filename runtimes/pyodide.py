"""``PyodideRuntime``: CPython compiled to WebAssembly (Pyodide), run by Deno.

Isolation comes from Deno's permission model, not from Linux namespaces, so it runs
wherever Deno does (macOS included, where bubblewrap does not): the process may read the
Pyodide distribution, its snapshot, the wheels it loads and the request's mounts, and
nothing else; no network, environment, writes, subprocesses or FFI
(``runtimes/wasm/deno.py``). Inside, the code has the whole standard library, an in-memory
filesystem (the mounts are copied into it, read-only), and the packages the request names
(``runtimes/wasm/packages.py``).

The host side is the CPython runtime's: the same bootstrap, the same JSON-line protocol
and ``RunnerDriver`` (``runtimes/runner/driver.py``), and inside Pyodide the same runner
logic (``runtimes/wasm/guest.py``); tool calls look synchronous to the code (JSPI) and
``async def`` tools gather. Three things differ:

* **Start.** Processes start from a memory snapshot made once per Pyodide build and set
  of preloaded packages (``runtimes/wasm/snapshot.py``), and a small pool keeps some
  loaded and waiting (``runtimes/wasm/pool.py``). A process serves one execution.
* **Hardening.** The code can reach JavaScript (``import js``), so the runner deletes the
  ``Deno`` global before it runs, writes every protocol line with a random per-process
  token (lines without it are dropped) and the host refuses calls to tools the execution
  was not given.
* **Limits.** ``max_memory_bytes`` caps the WebAssembly memory (``--wasm-max-mem-pages``;
  the interpreter itself takes about 25 MB of it): ``MemoryError`` in the code.
  ``timeout_seconds`` is compute time (paused while the code waits for a tool): at the
  limit ``runner.mjs`` interrupts Python through Pyodide's interrupt buffer, a timeout on
  the line it ran; the host's own clock kills the process ``kill_grace`` later if the code
  swallowed it. ``max_tool_calls`` and ``max_stdout_bytes`` as everywhere.

Checkpoints are tier 3 (``dump()`` is None): a parked or orphaned run is rebuilt by
journal replay in a fresh process, with the same seeded ``random`` and virtual clock as
the CPython runtime (``codemode.runtimes.types.Determinism``; the string hash seed is fixed for
every process, so the order of a set of strings is the same on every replay).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .constraints import CodeConstraints
from .errors import CapabilityError, CodeExecutionError, CodeRuntimeError, SandboxError
from .runner.bootstrap import build_bootstrap, runner_limits
from .runner.driver import RunnerDriver, RunnerExit, exit_error
from .runner.mounts import check_mounts
from .runner.process import OutputSink, exit_signal
from .runner.runtime import RunnerRuntime
from .signatures import ToolSignature
from .transports.stdio import StdioChannel
from .types import CheckpointTier, Determinism, ExecutionLimits, RuntimeCapabilities, SandboxOptions
from .wasm.deno import DenoProcess, ProcessSpec, memory_pages, read_only_paths, start_warm
from .wasm.distribution import Distribution, cache_root, ensure_pyodide, find_deno
from .wasm.packages import PackageResolver, ResolvedPackages
from .wasm.pool import WarmPool
from .wasm.snapshot import ensure_snapshot

#: The interpreter's own share of the WebAssembly memory is about 25 MB: below this a
#: memory limit leaves the code nothing.
MIN_MEMORY_BYTES = 48 * 1024 * 1024

PYODIDE_INSTRUCTIONS = (
    "This is CPython compiled to WebAssembly (Pyodide): the whole standard library imports. There are no "
    "host files (the filesystem is a private, empty scratch space in memory), no network, no subprocesses "
    "and no threads: get data through the functions below."
)


class _PyodideRun(RunnerDriver):
    """The host state behind one CodeExecution: the Deno process, its channel, the clock."""

    runtime_name = "pyodide"

    def __init__(
        self,
        runtime: PyodideRuntime,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
    ) -> None:
        super().__init__(signatures, limits, kill_grace=runtime.kill_grace, startup_timeout=runtime.startup_timeout)
        self.runtime = runtime
        self.options = options
        self.proc: DenoProcess | None = None
        self.spec: ProcessSpec | None = None
        self._output = OutputSink(0)

    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        rt = self.runtime
        self.spec = spec = await rt._spec(self.limits, self.options.packages, self.options.mounts)
        self.proc = proc = await rt._pool.acquire(spec, rt.startup_timeout)
        self._output = proc.take_output(self.limits.max_stdout_bytes)
        self.channel = channel = StdioChannel(token=proc.token)
        channel.attach(proc.process.proc)
        self.tasks.append(asyncio.create_task(self._watch_exit()))
        boot = build_bootstrap(
            code,
            self.signatures,
            inputs=inputs,
            limits=runner_limits(self.limits, processes=None, file_bytes=None),
            transport=channel.params,
            sys_path=[],
            determinism=determinism,
            prelude=self.prelude.source if self.prelude is not None else None,
        )
        await proc.process.send_line(boot.line())
        await self.expect_ready(rt.startup_timeout, "the pyodide sandbox")

    async def _watch_exit(self) -> None:
        assert self.proc is not None and self.channel is not None
        await self.proc.process.proc.wait()
        self.channel.sandbox_exited()

    async def death_error(self) -> CodeExecutionError | SandboxError:
        assert self.proc is not None
        process = self.proc.process
        code = await process.proc.wait()
        await process.wait_output(1.0)
        sig = exit_signal(code, bwrap=False)
        # Deno dies of a signal when the WebAssembly memory cannot grow: out of memory.
        ended = (
            RunnerExit(status=None, oom=True, detail=f"signal {sig}") if sig is not None else RunnerExit(status=code)
        )
        return exit_error(
            ended,
            where="the pyodide sandbox",
            ready=self.ready,
            timed_out=self.timed_out,
            limits=self.limits,
            tail=process.output.tail(),
            memory=f" (its Deno process died from signal {sig})" if sig is not None else "",
            stopped="stopped",
        )

    async def _on_call(self, msg: Any) -> Any:
        if msg.function_name not in self.signatures:
            # Only a forged message names a tool the code was not given (the stubs are the tools).
            raise await self.fail(
                CodeRuntimeError(
                    f"the code called {msg.function_name!r}, which is not one of this execution's tools",
                    error_type="PermissionError",
                    line=msg.line,
                )
            )
        return await super()._on_call(msg)

    @property
    def output(self) -> OutputSink:
        return self._output

    def drain_output(self) -> None:
        if self.proc is not None:
            self.proc.process.drain_output()

    async def wait_output(self, timeout: float) -> None:
        """The runner writes the code's output synchronously before each message: once a
        message is here, so is everything printed before it (no need to wait for the exit)."""
        assert self.proc is not None
        self.proc.process.drain_output()

    async def kill_for_timeout(self) -> None:
        assert self.proc is not None
        self.proc.process.kill()

    async def release(self) -> None:
        try:
            if self.proc is not None:
                # Nothing is left to do in it, even after its final message: kill it now and
                # reap it in the background (the kernel takes a while to free its memory).
                self.proc.process.kill()
                self.runtime._reap(self.proc)
        finally:
            if self.channel is not None:
                await self.channel.aclose()
            if self.spec is not None:
                self.runtime._pool.replenish(self.spec)


class PyodideRuntime(RunnerRuntime):
    """CPython in WebAssembly (Pyodide) in a Deno process per execution.

    :param packages: packages every execution gets, baked into the memory snapshot
        (pure-Python only: compiled modules cannot be snapshotted; give those per
        execution, ``execute(..., options=SandboxOptions(packages=[...]))``).
    :param wheel_dirs: local directories of wheels pip may pick from (pure-Python, or built
        for Pyodide's ABI).
    :param download_packages: let pip fetch missing wheels from its package index into the
        cache (``False``: only ``wheel_dirs`` and wheels cached before).
    :param distribution: a Pyodide distribution directory to use instead of the pinned npm
        package (a release's ``full/`` directory also brings its built packages: numpy...).
    :param cache_dir: where Pyodide, snapshots and wheels are cached
        (``CODEMODE_PYODIDE_DIR``, else ``<codemode data dir>/cache/pyodide``).
    :param pool_size: warm processes kept per kind of execution (memory cap, packages).
    :param deno: the Deno binary (default: PyPI ``deno``, ``CODEMODE_DENO``, ``PATH``).
    :param kill_grace: seconds past the time limit before the host kills the process.
    """

    name = "pyodide"
    constraints = CodeConstraints(additional_instructions=PYODIDE_INSTRUCTIONS)
    capabilities = RuntimeCapabilities(
        name="pyodide",
        stdlib_imports=True,
        third_party_packages=True,
        filesystem=False,
        network=False,
        checkpoint_tier=CheckpointTier.JOURNAL,
        type_checking=False,
        startup_latency_ms=500.0,
        packages=True,
        mounts=True,
    )

    def __init__(
        self,
        *,
        packages: Sequence[str] = (),
        wheel_dirs: Sequence[str | os.PathLike[str]] = (),
        download_packages: bool = True,
        distribution: str | os.PathLike[str] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        pool_size: int = 1,
        deno: str | None = None,
        startup_timeout: float = 120.0,
        kill_grace: float = 1.0,
    ) -> None:
        super().__init__()
        self.packages = tuple(packages)
        self.wheel_dirs = tuple(str(d) for d in wheel_dirs)
        self.download_packages = download_packages
        self.distribution = str(distribution) if distribution is not None else None
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.startup_timeout = startup_timeout
        self.kill_grace = kill_grace
        self._deno_option = deno
        self._pool = WarmPool(self._start_process, size=pool_size)
        self._setup_lock = asyncio.Lock()
        self._ready: _Setup | None = None
        self._reaping: set[asyncio.Task[None]] = set()
        if self.packages:
            listed = ", ".join(self.packages)
            self.constraints = self.constraints.model_copy(
                update={"additional_instructions": f"{PYODIDE_INSTRUCTIONS} Packages installed: {listed}."}
            )

    # -- set-up -------------------------------------------------------------------------

    async def _setup(self) -> _Setup:
        """Deno, Pyodide, the preloaded packages and the snapshot: found or made once."""
        if self._ready is not None:
            return self._ready
        async with self._setup_lock:
            if self._ready is None:
                cache = self.cache_dir or cache_root()
                deno = find_deno(self._deno_option)
                if self.distribution is not None:
                    dist = Distribution.load(self.distribution)
                else:
                    dist = await asyncio.to_thread(ensure_pyodide, cache)
                resolver = PackageResolver(dist, cache, wheel_dirs=self.wheel_dirs, download=self.download_packages)
                preload = await resolver.resolve(self.packages)
                if any(not w.name.endswith("-none-any.whl") for w in preload.wheels) or (
                    len(preload.wheels) != len(preload.load)
                ):
                    compiled = [w.name for w in preload.wheels if not w.name.endswith("-none-any.whl")]
                    raise CapabilityError(
                        "PyodideRuntime(packages=...) are baked into the memory snapshot, which cannot hold "
                        f"compiled modules ({', '.join(compiled) or 'packages of the distribution'}): give them "
                        "per execution (options=SandboxOptions(packages=[...]))",
                        error_type="CapabilityError",
                    )
                deno_dir = cache / "deno"
                snapshot = await ensure_snapshot(deno, deno_dir, dist, preload, cache)
                self._ready = _Setup(deno, deno_dir, dist, resolver, preload, snapshot)
        return self._ready

    async def _start_process(self, spec: ProcessSpec) -> DenoProcess:
        setup = await self._setup()
        return await start_warm(setup.deno, setup.deno_dir, spec)

    def check_options(self, options: SandboxOptions | None) -> SandboxOptions:
        """Mounts must exist and stay off the interpreter's own directories."""
        options = super().check_options(options)
        check_mounts(options.mounts, reserved=("/lib", "/codemode", "/home", "/home/pyodide"))
        return options

    async def _spec(
        self, limits: ExecutionLimits, packages: Sequence[str], mounts: Mapping[str, str] | None = None
    ) -> ProcessSpec:
        setup = await self._setup()
        if limits.max_memory_bytes < MIN_MEMORY_BYTES:
            raise CapabilityError(
                f"the pyodide runtime needs a memory limit of at least {MIN_MEMORY_BYTES // 2**20} MiB "
                f"(the interpreter takes about 25 MiB of it); the limit is {limits.max_memory_bytes} bytes",
                error_type="CapabilityError",
            )
        extra = await setup.resolver.resolve(list(packages)) if packages else ResolvedPackages()
        wanted = setup.preload + extra
        return ProcessSpec(
            snapshot=str(setup.snapshot),
            index_url=setup.dist.index_url,
            module_url=setup.dist.module_url,
            load=wanted.load,
            imports=extra.imports,
            read_paths=read_only_paths(
                [str(setup.dist.path), str(setup.snapshot)], wanted.read_paths, list(mounts or {})
            ),
            pages=memory_pages(limits.max_memory_bytes),
            mounts=tuple((os.path.realpath(src), dst) for src, dst in sorted((mounts or {}).items())),
        )

    async def warm(self, limits: ExecutionLimits | None = None, packages: Sequence[str] = ()) -> None:
        """Make the snapshot and start the pool now (a worker at start-up, a benchmark)."""
        await self._pool.warm(await self._spec(limits or ExecutionLimits(), packages))

    # -- executions -----------------------------------------------------------------------

    def new_run(
        self,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        session: bool = False,
    ) -> _PyodideRun:
        return _PyodideRun(self, signatures, limits, options)

    def _reap(self, proc: DenoProcess) -> None:
        task = asyncio.create_task(proc.aclose())
        self._reaping.add(task)
        task.add_done_callback(self._reaping.discard)

    async def close_executions(self) -> None:
        """Kill every live execution (and reap its process); the warm processes stay."""
        await super().close_executions()
        await asyncio.gather(*self._reaping, return_exceptions=True)

    async def aclose(self) -> None:
        """Kill every live execution and every warm process of this runtime."""
        await self.close_executions()
        await self._pool.aclose()


@dataclass(frozen=True)
class _Setup:
    """What every execution of a runtime shares, found or made once."""

    deno: str
    deno_dir: Path
    dist: Distribution
    resolver: PackageResolver
    preload: ResolvedPackages
    snapshot: Path
