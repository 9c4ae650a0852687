"""``CodeRuntime``: the only abstract class, a factory of ``CodeExecution`` handles."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from .constraints import FULL_PYTHON, CodeConstraints, build_code_mode_prompt
from .errors import CapabilityError
from .execution import CodeExecution
from .prelude import Prelude
from .session import CodeSession
from .signatures import FunctionsSpec, ToolSignature, normalize_functions
from .types import Determinism, ExecutionLimits, RuntimeCapabilities, SandboxOptions


class CodeRuntime(ABC):
    """A sandbox kind. Subclasses implement ``execute``; the rest has working defaults
    (no type checking, no checkpoints) so a consumer's code is the same for every tier."""

    #: Short name used in requests, checkpoints and the CLI (``monty``, ``python``, ``e2b``).
    name: str = "runtime"
    constraints: CodeConstraints = FULL_PYTHON
    capabilities: RuntimeCapabilities = RuntimeCapabilities(name="runtime")

    @property
    def live_capacity(self) -> int | None:
        """How many executions this runtime can hold open at once (a pool's size), or None
        when nothing here bounds it. A worker keeps runs live between steps up to it."""
        return None

    @abstractmethod
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
        """Start ``code`` with ``functions`` callable from it. Raises ``CodeSyntaxError`` /
        ``CodeTypeError`` / ``CapabilityError`` when the code cannot start; errors while
        running surface from ``next()``.

        ``determinism``: the seed and clock the code sees (see ``Determinism``). Pass the
        same value when the run is rebuilt by journal replay; None derives a seed from the
        code and inputs and leaves the real clock.

        ``options``: mounts, network and packages (``SandboxOptions``); implementations call
        ``self.check_options(options)`` first, so what they cannot honour is refused.

        ``prelude``: code run first in the same namespace (``runtimes/prelude.py``: saved
        snippets); the code is checked against its stubs too, and the execution keeps it
        (``CodeExecution.prelude``). Pass the same one to a journal replay."""

    def check_options(self, options: SandboxOptions | None) -> SandboxOptions:
        """``options`` (or the defaults), or ``CapabilityError`` naming what this runtime cannot do."""
        opts = options or SandboxOptions()
        caps = self.capabilities
        if opts.mounts and not caps.mounts:
            raise CapabilityError(f"the {self.name} runtime cannot mount host directories (mounts={dict(opts.mounts)})")
        if opts.network not in caps.network_policies:
            allowed = ", ".join(repr(p) for p in caps.network_policies)
            raise CapabilityError(
                f"the {self.name} runtime does not support network={opts.network!r} (it supports {allowed})"
            )
        if opts.packages and not caps.packages:
            raise CapabilityError(
                f"the {self.name} runtime cannot install packages ({', '.join(opts.packages)}); "
                "use a runtime whose sandbox has them"
            )
        return opts

    async def open_session(
        self,
        *,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        state: bytes | None = None,
    ) -> CodeSession | None:
        """A namespace that outlives one execution (``runtimes/session.py``): fresh, or
        restored from ``state`` (``CodeSession.dump()`` bytes). Returns None when ``state``
        cannot be used here (another version, a sandbox that is gone): the caller rebuilds
        the session by ``replay_cells``. ``limits``, ``determinism`` and ``options`` hold for
        every cell. Raises ``CapabilityError`` when the runtime has no sessions."""
        raise CapabilityError(f"the {self.name} runtime cannot keep a session across executions")

    async def type_check(self, code: str, signatures: FunctionsSpec, *, bound: Iterable[str] = ()) -> None:
        """Check ``code`` against the tool stubs (``bound``: names it finds bound before it
        runs, its inputs); raises ``CodeTypeError``. No-op by default."""
        return None

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        """Continue from ``dump()`` bytes; ``None`` when this runtime (or this version of it)
        cannot, and the caller re-executes or replays."""
        return None

    def restore_refusal(self, checkpoint: bytes) -> str:
        """Why ``restore(checkpoint)`` just returned None, in words for the audit."""
        return f"the checkpoint was written by another version of the {self.name} runtime"

    async def suspend(self, checkpoint: bytes) -> None:
        """Stop paying for what ``checkpoint`` names while keeping it restorable: a run parked
        on an approval holds no compute (E2B: pause the sandbox). No-op by default: a
        snapshot or a journal holds nothing live."""
        return None

    async def discard(self, checkpoint: bytes) -> None:
        """Free whatever ``checkpoint`` names for good (E2B: kill the sandbox); called when the
        execution ends, fails or is cancelled. Idempotent; no-op by default."""
        return None

    def prompt(self, functions: FunctionsSpec) -> str:
        """The code-mode prompt for these functions under this runtime's constraints."""
        return build_code_mode_prompt(normalize_functions(functions), self.constraints)

    def signatures(self, functions: FunctionsSpec) -> dict[str, ToolSignature]:
        return normalize_functions(functions)

    async def aclose(self) -> None:
        """Release pools and servers held by the runtime."""
        return None

    async def __aenter__(self) -> CodeRuntime:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
