"""Monty's errors as ours, and our answers to a call as Monty's: the vendor's exception types
on one side of ``MontyRuntime``, the runtime layer's hierarchy (``errors.py``) on the other."""

from __future__ import annotations

import re
import typing
from typing import Any

import pydantic_monty as pm

from .errors import (
    CodeExecutionError,
    CodeResourceError,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTimeoutError,
    CodeTypeError,
    SandboxError,
)
from .execution import CallOutcome

_KNOWN_EXC_TYPES = frozenset(typing.get_args(pm.ExcType))
#: Where a diagnostic of ty points: `` --> main.py:LINE:COLUMN`` (groups: up to the line, the
#: line, the column).
LOCATION_RE = re.compile(r"(--> [^:\n]+:)(\d+):(\d+)")


def monty_exception(outcome: CallOutcome) -> dict[str, Any]:
    """A host answer as Monty's ``ExternalResult``. Exception types Monty does not know
    are raised as RuntimeError with the original type name kept in the message."""
    if outcome.kind == "result":
        return {"return_value": outcome.value}
    exc_type = outcome.exc_type
    if exc_type in _KNOWN_EXC_TYPES:
        return {"exc_type": exc_type, "message": outcome.message}
    return {"exc_type": "RuntimeError", "message": f"{exc_type}: {outcome.message}"}


def map_monty_error(err: BaseException) -> CodeExecutionError | SandboxError:
    """Vendor error -> our hierarchy, with type, message and line ready for an LLM."""
    if isinstance(err, pm.MontyTypingError):
        text = err.display()
        m = LOCATION_RE.search(text)
        line = int(m.group(2)) if m else None
        first = text.strip().splitlines()[0] if text.strip() else str(err)
        if "invalid-syntax" in first:
            msg = first.split(":", 1)[-1].strip()
            return CodeSyntaxError(msg, error_type="SyntaxError", line=line, traceback=text.strip())
        return CodeTypeError(first, error_type="TypeError", line=line, traceback=text.strip())
    if isinstance(err, pm.MontySyntaxError):
        frames = err.traceback()
        line = frames[-1].line if frames else None
        return CodeSyntaxError(err.display("msg"), error_type="SyntaxError", line=line, traceback=err.display())
    if isinstance(err, pm.MontyRuntimeError):
        inner = err.exception()
        etype = type(inner).__name__
        frames = err.traceback()
        line = frames[-1].line if frames else None
        msg = err.display("msg")
        tb = err.display()
        if etype == "NotImplementedError" and "syntax parser does not yet support" in msg:
            return CodeSyntaxError(msg, error_type="SyntaxError", line=line, traceback=tb)
        if etype == "TimeoutError" and "time limit exceeded" in msg:
            return CodeTimeoutError(msg, error_type="TimeoutError", line=line, traceback=tb)
        if etype == "MemoryError":
            return CodeResourceError(msg, error_type="MemoryError", line=line, traceback=tb)
        if etype == "RuntimeError" and "suspension" in msg.lower():
            return CodeResourceError(msg, error_type="RuntimeError", line=line, traceback=tb)
        return CodeRuntimeError(msg, error_type=etype, line=line, traceback=tb)
    if isinstance(err, pm.MontyCrashedError):
        if err.timed_out:
            return CodeTimeoutError("the sandbox exceeded its time limit and was stopped", error_type="TimeoutError")
        return SandboxError(f"the Monty worker crashed: {err}")
    if isinstance(err, pm.MontyError):
        return SandboxError(f"Monty failed: {err}")
    return SandboxError(f"Monty failed: {type(err).__name__}: {err}")
