"""The error hierarchy every runtime maps its vendor errors onto.

Consumers never see a vendor exception type. Each error carries what an LLM needs
to fix its code: the Python exception type name, the message and the line number.
"""

from __future__ import annotations


class CodeExecutionError(Exception):
    """Base class: the sandboxed code failed (or could not run) for a reason in the code."""

    #: The category name used in-band (ExecutionOutcome.error.type uses `error_type`).
    kind: str = "execution"

    def __init__(
        self,
        message: str,
        *,
        error_type: str | None = None,
        line: int | None = None,
        traceback: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type or type(self).__name__
        self.line = line
        self.traceback = traceback

    def llm_message(self) -> str:
        """One readable paragraph for a model that will fix its code."""
        where = f" (line {self.line})" if self.line is not None else ""
        text = f"{self.error_type}{where}: {self.message}"
        detail = self.traceback or ""
        if detail.startswith(self.message):  # a diagnostic that opens with the message (ty's)
            detail = detail[len(self.message) :].lstrip("\n")
        if detail.strip() and detail not in text:
            text += f"\n{detail}"
        return text

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.error_type}{where}: {self.message}"


class CodeSyntaxError(CodeExecutionError):
    """The code does not parse, or uses syntax the runtime does not support."""

    kind = "syntax"


class CodeTypeError(CodeExecutionError):
    """Static type checking against the tool stubs rejected the code."""

    kind = "type"


class CodeRuntimeError(CodeExecutionError):
    """The code raised an exception while running (uncaught)."""

    kind = "runtime"


class CodeTimeoutError(CodeExecutionError):
    """The code exceeded its time limit."""

    kind = "timeout"


class CodeResourceError(CodeExecutionError):
    """The code exceeded a resource limit: memory, output size or number of tool calls."""

    kind = "resource"


class CapabilityError(CodeExecutionError):
    """An option was asked of a runtime that cannot honour it; raised before execution."""

    kind = "capability"


class SandboxError(Exception):
    """The sandbox itself failed (crashed, vanished, protocol broken): an infrastructure fault,
    not an error in the user's code. Callers may retry on a fresh sandbox."""


class ExecutionProtocolError(RuntimeError):
    """The host drove a CodeExecution out of protocol (e.g. answered an unknown call id)."""


class NonDeterminismError(CodeExecutionError):
    """On journal replay the code made a call different from the recorded one (it reads a
    clock, randomness or the environment): reported in-band, never retried."""

    kind = "nondeterminism"


__all__ = [
    "CapabilityError",
    "CodeExecutionError",
    "CodeResourceError",
    "CodeRuntimeError",
    "CodeSyntaxError",
    "CodeTimeoutError",
    "CodeTypeError",
    "ExecutionProtocolError",
    "NonDeterminismError",
    "SandboxError",
]
