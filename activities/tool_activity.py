"""Each tool as its own activity type, named after the tool, with its own retry policy.

The policy itself (attempts, timeout, non-retryable types) is applied by the workflow when
it schedules the activity; here the tool runs with ``current_call()`` set, and a failure is
raised as an ``ApplicationError`` carrying the exception's type name, its message and the
attempt number, so the code can later see ``ValueError("unknown city: Atlantis")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from .models import ToolInput, ToolOutput
from .tools import CallContext, ToolRegistry, ToolSpec, _current


def make_tool_activity(spec: ToolSpec) -> Callable[..., Any]:
    @activity.defn(name=spec.name)
    async def run_tool(inp: ToolInput) -> ToolOutput:
        attempt = activity.info().attempt
        token = _current.set(CallContext(inp.execution_id, inp.call_id, spec.name, attempt))
        try:
            value = await spec.invoke(inp.args, inp.kwargs)
        except Exception as err:
            exc_type = type(err).__name__
            raise ApplicationError(
                str(err),
                {"attempt": attempt},
                type=exc_type,
                non_retryable=exc_type in spec.options.non_retryable,
            ) from err
        finally:
            _current.reset(token)
        try:
            return ToolOutput(value=to_jsonable_python(value), attempt=attempt)
        except Exception as err:
            raise ApplicationError(
                f"{spec.name} returned a value that cannot be sent to the code: {err}",
                {"attempt": attempt},
                type="TypeError",
                non_retryable=True,
            ) from err

    return run_tool


def tool_activities(registry: ToolRegistry) -> list[Callable[..., Any]]:
    return [make_tool_activity(spec) for spec in registry]
