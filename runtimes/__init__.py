"""Vendor-agnostic sandbox layer. Pure asyncio; never imports temporalio.

Runtimes live in their own modules and import their vendor lazily::

    from codemode.runtimes.monty import MontyRuntime     # needs pydantic-monty
    from codemode.runtimes.python import PythonRuntime   # real CPython in a subprocess
    from codemode.runtimes.pyodide import PyodideRuntime  # CPython in WebAssembly, run by Deno

``get_runtime(name)`` builds one by name.
"""

from __future__ import annotations

from typing import Any

from .base import CodeRuntime
from .constraints import FULL_PYTHON, CodeConstraints, build_code_mode_prompt
from .errors import (
    CapabilityError,
    CodeExecutionError,
    CodeResourceError,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTimeoutError,
    CodeTypeError,
    ExecutionProtocolError,
    NonDeterminismError,
    SandboxError,
)
from .execution import CallOutcome, CodeExecution
from .journal_replay import JournalEntry, replay
from .signatures import (
    FunctionsSpec,
    ToolParameter,
    ToolSignature,
    normalize_functions,
    render_stubs,
    signature_from_callable,
    signature_from_json_schema,
)
from .types import (
    CheckpointTier,
    Determinism,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    NetworkPolicy,
    RuntimeCapabilities,
    SandboxOptions,
)

#: name -> "module:Class", imported on first use so optional vendors stay optional.
RUNTIMES: dict[str, str] = {
    "monty": "codemode.runtimes.monty:MontyRuntime",
    "python": "codemode.runtimes.python:PythonRuntime",
    "e2b": "codemode.runtimes.e2b:E2BRuntime",
    "docker": "codemode.runtimes.docker:DockerRuntime",
    "pyodide": "codemode.runtimes.pyodide:PyodideRuntime",
    "blaxel": "codemode.runtimes.blaxel:BlaxelRuntime",
    "modal": "codemode.runtimes.modal:ModalRuntime",
}

#: The runtimes whose sandboxes outlive a worker (a provider's, or an engine's), with the
#: environment variables that configure each: where all are set, a worker's sandbox sweep
#: builds the runtime to find its leftover sandboxes even before a step needs it
#: (``activities/sandbox_sweep.py``), without importing a vendor's SDK otherwise.
OUTLIVE_THE_WORKER: dict[str, tuple[str, ...]] = {
    "docker": ("CODEMODE_DOCKER_IMAGE",),
    "e2b": ("E2B_API_KEY",),
    "blaxel": ("BL_API_KEY", "BL_WORKSPACE"),
    "modal": ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"),
}


def runtime_class(name: str) -> type[CodeRuntime]:
    """The class of a runtime by name, imported (its vendor too) but not started."""
    import importlib

    try:
        target = RUNTIMES[name]
    except KeyError:
        raise ValueError(f"unknown runtime {name!r}; known: {', '.join(sorted(RUNTIMES))}") from None
    module_name, cls_name = target.split(":")
    return getattr(importlib.import_module(module_name), cls_name)


def get_runtime(name: str, **options: Any) -> CodeRuntime:
    """Build a runtime by name (``monty``, ``python``, ...)."""
    return runtime_class(name)(**options)


def code_mode_prompt(name: str, functions: FunctionsSpec) -> str:
    """The prompt (rules and tool stubs) for code that runs on the runtime ``name``, from its
    class's constraints: nothing is started and no credential is needed (a front can show it
    before any sandbox exists)."""
    return build_code_mode_prompt(normalize_functions(functions), runtime_class(name).constraints)


__all__ = [
    "FULL_PYTHON",
    "OUTLIVE_THE_WORKER",
    "RUNTIMES",
    "CallOutcome",
    "CapabilityError",
    "CheckpointTier",
    "CodeConstraints",
    "CodeExecution",
    "CodeExecutionError",
    "CodeResourceError",
    "CodeRuntime",
    "CodeRuntimeError",
    "CodeSyntaxError",
    "CodeTimeoutError",
    "CodeTypeError",
    "Determinism",
    "ExecutionLimits",
    "ExecutionProtocolError",
    "ExecutionResult",
    "FunctionCall",
    "JournalEntry",
    "NonDeterminismError",
    "NetworkPolicy",
    "RuntimeCapabilities",
    "SandboxOptions",
    "SandboxError",
    "ToolParameter",
    "ToolSignature",
    "build_code_mode_prompt",
    "code_mode_prompt",
    "get_runtime",
    "normalize_functions",
    "replay",
    "render_stubs",
    "runtime_class",
    "signature_from_callable",
    "signature_from_json_schema",
]
