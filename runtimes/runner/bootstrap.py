"""What the host sends the runner before the code starts: one JSON line on its stdin.

The bootstrap travels on stdin, not in argv or the environment, because it carries the
HTTP transport's token and the code's inputs, and other processes on the host can read a
process's argv (and, as the same user, its environment).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from ..signatures import ToolSignature
from ..transports.protocol import jsonable
from ..types import Determinism, ExecutionLimits
from .package import RUNNER_PATH  # noqa: F401  (the runner's entry point; re-exported)


class ToolSource(BaseModel):
    """One tool as the runner builds it: the ``def`` from ``ToolSignature.stub()`` (made
    sync: it only binds arguments) plus whether the real tool is ``async def``. ``name`` is
    what the runner reports in its calls; ``path`` (``memory.read_graph``), when set, is
    where the code finds it: an attribute of a namespace object the runner creates."""

    name: str
    path: str | None = None
    is_async: bool = False
    source: str


class RunnerLimits(BaseModel):
    """Limits the runner applies to itself (setrlimit) before any user code runs."""

    timeout_seconds: float
    cpu_seconds: int | None = None
    memory_bytes: int | None = None
    processes: int | None = None
    file_bytes: int | None = None


class Bootstrap(BaseModel):
    code: str
    functions: list[ToolSource] = Field(default_factory=list)
    inputs: dict[str, Any] = Field(default_factory=dict)
    limits: RunnerLimits
    #: ``CallbackChannel.params``.
    transport: dict[str, Any]
    #: Added to ``sys.path`` (the interpreter runs with ``-S``: site-packages without .pth files).
    sys_path: list[str] = Field(default_factory=list)
    #: The seed and clock the code sees (``codemode.runtimes.types.Determinism``); None: the real ones.
    determinism: Determinism | None = None
    #: Mark the output stream before each message (``output-mark`` in the runner) for hosts
    #: that receive the output and the protocol on two streams with no order between them.
    output_marks: bool = False
    #: Session mode: no code now; the runner serves ``cell`` messages in one namespace.
    session: bool = False
    #: Run before the code, in its namespace, under the file name ``<snippets>`` (saved snippets).
    prelude: str | None = None

    def line(self) -> bytes:
        return self.model_dump_json().encode() + b"\n"


def _untyped_stub(name: str) -> str:
    return f"def {name}(*args, **kwargs): ..."


def tool_source(sig: ToolSignature) -> ToolSource:
    """The tool's real signature as a sync ``def`` the runner can exec. A default value
    whose repr is not Python (``<object at 0x...>``) falls back to ``(*args, **kwargs)``."""
    source = sig.model_copy(update={"is_async": False}).stub(with_docstring=True)
    try:
        compile("from __future__ import annotations\n" + source, "<tools>", "exec")
    except SyntaxError:
        source = _untyped_stub(sig.attr)
    return ToolSource(name=sig.name, path=sig.path, is_async=sig.is_async, source=source)


def runner_limits(limits: ExecutionLimits, *, processes: int | None, file_bytes: int | None) -> RunnerLimits:
    return RunnerLimits(
        timeout_seconds=limits.timeout_seconds,
        # RLIMIT_CPU backs up the compute clock for code that ignores the timeout signal
        # (or burns CPU in several threads): one second of slack for start-up.
        cpu_seconds=math.ceil(limits.timeout_seconds) + 1,
        memory_bytes=limits.max_memory_bytes,
        processes=processes,
        file_bytes=file_bytes,
    )


def build_bootstrap(
    code: str,
    signatures: Mapping[str, ToolSignature],
    *,
    inputs: Mapping[str, Any] | None,
    limits: RunnerLimits,
    transport: dict[str, Any],
    sys_path: list[str],
    determinism: Determinism | None = None,
    output_marks: bool = False,
    session: bool = False,
    prelude: str | None = None,
) -> Bootstrap:
    return Bootstrap(
        code=code,
        functions=[tool_source(s) for s in signatures.values()],
        inputs=jsonable(dict(inputs or {})),
        limits=limits,
        transport=transport,
        sys_path=sys_path,
        determinism=determinism,
        output_marks=output_marks,
        session=session,
        prelude=prelude,
    )


def cell_message(
    code: str,
    signatures: Mapping[str, ToolSignature],
    *,
    inputs: Mapping[str, Any] | None,
    limits: ExecutionLimits,
) -> dict[str, Any]:
    """A session's next cell, as the runner in session mode reads it."""
    return {
        "type": "cell",
        "code": code,
        "functions": [tool_source(s).model_dump() for s in signatures.values()],
        "inputs": jsonable(dict(inputs or {})),
        "limits": {"timeout_seconds": limits.timeout_seconds, "cpu_seconds": math.ceil(limits.timeout_seconds) + 1},
    }
