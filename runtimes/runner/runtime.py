"""``RunnerRuntime``: what every runtime that runs our CPython runner does the same way.

A runtime of this kind makes one run (a ``RunnerDriver``) per execution or session and
keeps the live ones, so ``aclose`` frees them all. It checks the request's options, starts
the run, closes it when it cannot start, and hands out the execution or session handle; a
syntax check stands in for type checking (CPython has none). What differs from one sandbox
to the next is the run: a local process (``runtimes/python.py``, ``runtimes/pyodide.py``) or
a provider's sandbox that outlives this worker (``runtimes/runner/provider.py``).
"""

from __future__ import annotations

import ast
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from ..base import CodeRuntime
from ..errors import CapabilityError, CodeSyntaxError
from ..execution import CodeExecution
from ..prelude import Prelude
from ..session import CodeSession
from ..signatures import FunctionsSpec, ToolSignature, normalize_functions
from ..types import Determinism, ExecutionLimits, SandboxOptions
from .driver import RunnerDriver


class RunnerRuntime(CodeRuntime):
    """A runtime whose executions are runs of our runner. Subclasses build the run
    (``new_run``); the rest of the lifecycle is here."""

    def __init__(self) -> None:
        self._live: set[RunnerDriver] = set()

    @abstractmethod
    def new_run(
        self,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        session: bool = False,
    ) -> RunnerDriver:
        """A run of the runner, not started."""

    def track(self, run: RunnerDriver) -> RunnerDriver:
        """Keep ``run`` among the live ones until it closes."""
        run.live = self._live
        self._live.add(run)
        return run

    async def _started(
        self, run: RunnerDriver, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism | None
    ) -> RunnerDriver:
        self.track(run)
        try:
            await run.start(code, inputs, determinism or Determinism.derived(code, inputs))
        except BaseException:
            await run.close()
            raise
        return run

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
        options = self.check_options(options)
        run = self.new_run(normalize_functions(functions), limits or ExecutionLimits(), options)
        run.prelude = prelude  # the runner executes it before the code, under a file of its own
        return (await self._started(run, code, inputs, determinism)).execution()

    async def open_session(
        self,
        *,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        state: bytes | None = None,
    ) -> CodeSession | None:
        """A runner in session mode: fresh, or the one ``state`` names (``restore_session``)."""
        options = self.check_options(options)
        if not self.capabilities.sessions:
            raise CapabilityError(f"the {self.name} runtime cannot keep a session across executions")
        if state is not None:
            return await self.restore_session(state)
        self.check_session()
        run = self.new_run({}, limits or ExecutionLimits(), options, session=True)
        return (await self._started(run, "", None, determinism or Determinism.derived("", None))).session()

    def check_session(self) -> None:
        """Raise ``CapabilityError`` when this runtime, as configured, cannot keep a session."""
        return None

    async def restore_session(self, state: bytes) -> CodeSession | None:
        """The session ``state`` names; None when it cannot go on (the caller replays its
        cells). A runtime whose runs die with the worker has nothing to restore."""
        return None

    async def type_check(self, code: str, signatures: FunctionsSpec, *, bound: Iterable[str] = ()) -> None:
        """No static type checking for CPython; a syntax check without starting a sandbox
        (with this interpreter's grammar)."""
        try:
            compile(code, "<code>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except SyntaxError as exc:
            raise CodeSyntaxError(str(exc.msg), error_type=type(exc).__name__, line=exc.lineno) from None
        except ValueError as exc:  # a NUL byte
            raise CodeSyntaxError(str(exc), error_type="SyntaxError") from None

    async def close_executions(self) -> None:
        """Close every live run of this runtime."""
        for run in list(self._live):
            await run.close()

    async def aclose(self) -> None:
        await self.close_executions()
