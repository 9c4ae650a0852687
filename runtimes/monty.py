"""``MontyRuntime``: the Rust interpreter that pauses at every tool call and snapshots its VM.

Tier-1 checkpoints: ``dump()`` is the VM snapshot (about 4 KB for a small heap) inside a
versioned envelope, so any process with the same Monty version can continue a run, and a
checkpoint from another version is refused with ``None``.

Monty runs in a pool of worker subprocesses (one pool per runtime instance); a crashed
worker never takes the host down. Requires PyPI ``pydantic-monty`` 1.4.x.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any

try:
    import pydantic_monty as pm
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "MontyRuntime needs the Monty interpreter: pip install 'pydantic-monty>=1.4,<1.5' "
        "(the PyPI package 'monty-python' is an unrelated project)"
    ) from exc

from .base import CodeRuntime
from .checkpoint import decode_checkpoint
from .constraints import CodeConstraints
from .env_numbers import number_from_env
from .errors import CodeExecutionError, CodeSyntaxError, CodeTypeError, SandboxError
from .execution import CallOutcome, CodeExecution
from .exit_settle import settle_at_exit
from .monty_checker import TypeChecker, bound_before, type_check_stubs
from .monty_errors import map_monty_error
from .monty_pool import IdlePool, idle_setting
from .monty_run import MONTY_VERSION, _MontyRun, _StdoutSink, closing
from .monty_session import SESSION_FORMAT, _MontySession
from .prelude import Prelude
from .session import CodeSession
from .signatures import FunctionsSpec, ToolSignature, normalize_functions
from .types import (
    CheckpointTier,
    Determinism,
    ExecutionLimits,
    FunctionCall,
    RuntimeCapabilities,
    SandboxOptions,
)

log = logging.getLogger(__name__)


#: Stdlib modules Monty 1.4 imports and that work without host access: the list the prompt
#: offers. Measured against every name in ``sys.stdlib_module_names`` by
#: tests/runtimes/test_monty_constraints.py.
MONTY_MODULES = (
    "asyncio", "base64", "binascii", "bisect", "collections", "copy", "csv", "dataclasses",
    "datetime", "decimal", "functools", "hashlib", "itertools", "json", "math", "random", "re",
    "sys", "time", "tomllib", "typing", "unicodedata",
)  # fmt: skip

#: Also importable, but every filesystem call in them is denied (no mounts): not offered.
MONTY_OS_MODULES = ("os", "pathlib", "posixpath")

MONTY_CONSTRAINTS = CodeConstraints(
    importable_modules=MONTY_MODULES,
    supports_third_party_packages=False,
    supports_class_inheritance=False,
    supports_generators=False,
    supports_del=False,
    supports_filesystem=False,
    additional_instructions=(
        "This is Monty, a fast sandboxed subset of Python: no file or network access, a restricted standard library."
    ),
)


def _processes_setting() -> int | None:
    processes = number_from_env(
        "CODEMODE_MONTY_PROCESSES", 0, cast=int, minimum=3, expected="a whole number of at least 3"
    )
    return int(processes) or None


async def _open_checker_pool(workers: int) -> Any:
    """The type checker's own pool (``monty_checker.py``)."""
    settle_at_exit()
    pool = pm.AsyncMonty(min_processes=1, max_processes=workers, checkout_timeout=60.0)
    await pool.__aenter__()
    return pool


def _monty_limits(limits: ExecutionLimits, *, session: bool = False) -> dict[str, Any]:
    return {
        "max_feed_duration_secs": limits.timeout_seconds,
        "max_memory": limits.max_memory_bytes,
        # Every call, future resolution and name lookup is a suspension: leave head room,
        # our own max_tool_calls is the limit users see. The pool counts them over the whole
        # checkout, so a session (many feeds) relies on our per-cell count and the time limit.
        "max_suspensions": 2**31 - 1 if session else max(1000, limits.max_tool_calls * 4),
    }


class MontyRuntime(CodeRuntime):
    """Monty sandbox. Stateless between steps: any process with the same Monty version can
    restore any checkpoint."""

    name = "monty"
    constraints = MONTY_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="monty",
        stdlib_imports=True,
        importable_modules=list(MONTY_MODULES),
        third_party_packages=False,
        filesystem=False,
        network=False,
        checkpoint_tier=CheckpointTier.SNAPSHOT,
        type_checking=True,
        startup_latency_ms=5.0,
        sessions=True,
    )

    def __init__(
        self,
        *,
        type_check: bool = True,
        max_processes: int | None = None,
        min_processes: int = 1,
        os_policy: Mapping[str, Any] | None = None,
        checkout_timeout: float = 60.0,
        idle_seconds: float | None = None,
    ) -> None:
        self.type_check_enabled = type_check
        #: Monty worker subprocesses at most. Every open execution holds one (even while it
        #: waits for a tool), so a checkout beyond waits up to ``checkout_timeout`` seconds,
        #: then fails with SandboxError. The pool starts them as needed (about 7 MB each plus
        #: the heap they hold) and keeps them; a worker keeps executions live between steps in
        #: them (``activities/live_runs.py``), so the default leaves room for many at once.
        #: ``CODEMODE_MONTY_PROCESSES`` sets it for a worker that runs more at once (issue 28:
        #: at 100 concurrent executions, 256 cost 10% less CPU per call than 64).
        self.max_processes = max_processes or _processes_setting() or max(64, 2 * (os.cpu_count() or 1))
        self._checkout_timeout = checkout_timeout
        self._os_policy = dict(os_policy) if os_policy else None
        #: Checks code before it runs, in warm sessions of its own (``monty_checker.py``).
        self._checker = TypeChecker(_open_checker_pool, map_monty_error, self._os_policy)
        #: Closed when no session has been out for ``idle_seconds`` (``monty_pool.py``).
        self._pool = IdlePool(
            {"min_processes": min_processes, "max_processes": self.max_processes, "checkout_timeout": checkout_timeout},
            idle_seconds=idle_setting() if idle_seconds is None else idle_seconds,
            on_idle=self._checker.close_if_idle,
        )

    async def aclose(self) -> None:
        await self._checker.aclose()
        await self._pool.aclose()

    @property
    def live_capacity(self) -> int:
        return self.max_processes

    async def _checkout(
        self,
        *,
        limits: ExecutionLimits | Mapping[str, Any],
        stubs: str | None,
        type_check: bool,
        os_policy: Mapping[str, Any] | None = None,
        repl: bool = False,
    ) -> Any:
        try:
            return await self._pool.checkout(
                limits=_monty_limits(limits, session=repl) if isinstance(limits, ExecutionLimits) else dict(limits),
                type_check=type_check,
                type_check_stubs=stubs,
                os_policy=dict(os_policy) if os_policy is not None else self._os_policy,
            )
        except TimeoutError:
            raise SandboxError(
                f"no Monty worker became free within {self._checkout_timeout:.0f} s: all "
                f"{self.max_processes} are held by executions that were not closed or are still running"
            ) from None
        except pm.MontyError as err:
            raise map_monty_error(err) from None

    def _determinism_policy(self, determinism: Determinism | None) -> dict[str, Any] | None:
        """Monty's own ``os_policy`` for a ``Determinism``: a seeded ``random`` and a clock
        frozen at ``epoch`` (None: the runtime's policy, the worker's entropy and clock)."""
        if determinism is None:
            return None
        import datetime

        policy = dict(self._os_policy or {})
        policy["random_start"] = {"seed": determinism.seed}
        if determinism.epoch is not None:
            policy["datetime"] = datetime.datetime.fromtimestamp(determinism.epoch, tz=datetime.timezone.utc)
        return policy

    async def execute(
        self,
        code: str,
        *,
        functions: FunctionsSpec,
        inputs: Mapping[str, Any] | None = None,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        prelude: Prelude | None = None,
    ) -> CodeExecution:
        self.check_options(options)
        limits = limits or ExecutionLimits()
        signatures = normalize_functions(functions)
        # What the code sees: the tools, and what a prelude defines (saved snippets).
        seen = {**signatures, **({s.name: s for s in prelude.stubs} if prelude is not None else {})}
        # The sandbox starts while the check runs; the code is fed only once it passed.
        checking = (
            asyncio.ensure_future(
                self._checker.check_once(code, type_check_stubs(seen), bound_before(seen, inputs or {}))
            )
            if self.type_check_enabled
            else None
        )
        try:
            session = await self._checkout(
                limits=limits,
                stubs=None,
                type_check=False,
                os_policy=self._determinism_policy(determinism),
            )
        except BaseException:
            if checking is not None:
                checking.cancel()
                with contextlib.suppress(BaseException):
                    await checking
            raise
        if checking is not None:
            try:
                await checking
            except BaseException:
                await session.__aexit__(None, None, None)
                raise
        sink = _StdoutSink(limits.max_stdout_bytes)
        run = _MontyRun(self, session, signatures, limits, sink, code=code, determinism=determinism, prelude=prelude)
        if prelude is not None:
            await self._feed_prelude(run, prelude)
        return await self._feed(run, code, inputs)

    async def _feed_prelude(self, run: _MontyRun, prelude: Prelude) -> None:
        """Run the prelude as the checkout's first feed: it only defines functions, so it ends
        at once (anything else is a fault of the host that composed it, not of the code)."""
        try:
            done = await run.session.feed_start(prelude.source, print_callback=run.sink)
        except pm.MontyError as err:
            await run.close()
            raise SandboxError(f"the prelude (saved snippets) did not run: {err}") from None
        except asyncio.CancelledError:
            closing(run.close())
            raise
        if not isinstance(done, pm.MontyComplete):
            await run.close()
            raise SandboxError(f"the prelude (saved snippets) did not end at once ({type(done).__name__})")

    async def _feed(self, run: _MontyRun, code: str, inputs: Mapping[str, Any] | None) -> CodeExecution:
        """Start ``code`` in the run's session and run it to its first event."""
        session = run.session
        try:
            started = session.feed_start(code, inputs=dict(inputs or {}), print_callback=run.sink)
        except pm.MontyError as err:  # refused before running: an input value Monty cannot hold
            run.snap = None  # nothing ran: a session's VM is still idle
            await run.close()
            raise TypeError(f"the inputs cannot be passed to Monty: {err}") from None
        try:
            await run._resume(lambda: started)  # closes the session itself when the code fails
        except (CodeSyntaxError, CodeTypeError):
            raise  # the code cannot start
        except CodeExecutionError as err:
            # It started and failed before its first call: report it from next(), like every
            # runtime, so the handle (and the stdout printed before the error) is available.
            run.failed = None
            run.deferred = err
        return run.execution()

    async def open_session(
        self,
        *,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        state: bytes | None = None,
    ) -> CodeSession | None:
        self.check_options(options)
        limits = limits or ExecutionLimits()
        meta: dict[str, Any] = {}
        vm: bytes | None = None
        if state is not None:
            decoded = decode_checkpoint(state, SESSION_FORMAT, MONTY_VERSION)
            if decoded is None:
                return None  # another Monty version (or not a session's state): replay
            meta, vm = decoded
        pm_session = await self._checkout(
            limits=limits, stubs=None, type_check=False, os_policy=self._determinism_policy(determinism), repl=True
        )
        session = _MontySession(self, pm_session, limits, determinism, meta)
        if vm is not None:
            try:
                await pm_session.load_session(vm)
            except pm.MontyError as err:
                log.warning("Monty refused a session's state: %s", err)
                await session.close()
                return None
        return session.handle()

    async def type_check(self, code: str, signatures: FunctionsSpec, *, bound: Iterable[str] = ()) -> None:
        """Type-check against the tool stubs; raises ``CodeTypeError`` (or ``CodeSyntaxError``).

        Monty has no check-only call: the code is fed with a zero time budget, sleeps that
        return at once and a small heap, so at most a few instructions run. Nothing escapes:
        a tool call only suspends the VM (no host answers it here), print output is dropped
        and Monty denies OS access; the session is discarded."""
        sigs = normalize_functions(signatures)
        await self._checker.check_once(code, type_check_stubs(sigs), bound_before(sigs, bound))

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        decoded = decode_checkpoint(checkpoint, "monty", MONTY_VERSION)
        if decoded is None:
            return None
        meta, payload = decoded
        try:
            signatures = {n: ToolSignature.model_validate(s) for n, s in meta["functions"].items()}
            limits = ExecutionLimits.model_validate(meta["limits"])
            pending = [FunctionCall.model_validate(c) for c in meta["pending"]]
            answers = {
                cid: CallOutcome(a["kind"], value=a["value"], exc_type=a["exc_type"], message=a["message"])
                for cid, a in meta.get("answers", {}).items()
            }
            determinism = Determinism.model_validate(meta["determinism"]) if meta.get("determinism") else None
            prelude = Prelude.model_validate(meta["prelude"]) if meta.get("prelude") else None
        except (KeyError, TypeError, ValueError):
            log.warning("refusing a Monty checkpoint with an unreadable header")
            return None
        sink = _StdoutSink(limits.max_stdout_bytes, already=int(meta.get("stdout_bytes", 0)))
        cell_meta = meta.get("cell")
        session = await self._checkout(
            limits=limits,
            stubs=None,
            type_check=False,
            os_policy=self._determinism_policy(determinism),
            repl=isinstance(cell_meta, dict),
        )
        cell = None
        if isinstance(cell_meta, dict):  # a cell of a session: the snapshot holds the whole REPL
            cell = _MontySession(self, session, limits, determinism, cell_meta)
        run = _MontyRun(
            self,
            session,
            signatures,
            limits,
            sink,
            code=meta.get("code"),
            tool_calls=int(meta.get("tool_calls", 0)),
            determinism=determinism,
            cell=cell,
            prelude=prelude,
        )
        try:
            run.snap = await session.load_snapshot(payload, print_callback=sink)
        except pm.MontyError as err:
            log.warning("Monty refused a checkpoint: %s", err)
            await run.close()
            return None
        except asyncio.CancelledError:  # (a big heap takes a while: its process goes back)
            closing(run.close())
            raise
        run.shown = {c.call_id: c for c in pending}
        run.answers = answers
        execution = run.execution()
        if cell is not None:
            cell.current = run
            execution.session = cell.handle()
        return execution
