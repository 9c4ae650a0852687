"""Each tool as its own activity type, named after the tool, with its own retry policy.

The policy's attempts and timeout are applied by the workflow when it schedules the
activity; whether a failure is final is decided here, where the exception is known: a
failure is raised as an ``ApplicationError`` carrying the exception's type name, its message
and the attempt number (non-retryable when its type is in the tool's ``non_retryable``), so
the code can later see ``ValueError("unknown city: Atlantis")``.

A result larger than ``MAX_VALUE_BYTES`` is refused here, as a ``ValueError`` the code can
catch, rather than sent as a payload no store or server should have to hold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from pydantic_core import to_json, to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from .models import MAX_VALUE_BYTES, ToolInput, ToolOutput, clip, human_bytes
from .tools import CallContext, ToolRegistry, ToolSpec, _current


def make_tool_activity(spec: ToolSpec) -> Callable[..., Any]:
    @activity.defn(name=spec.name)
    async def run_tool(inp: ToolInput) -> ToolOutput:
        info = activity.info()
        attempt = info.attempt
        token = _current.set(CallContext(info.workflow_id or "", inp.call_id, spec.name, attempt))
        beating = asyncio.create_task(_heartbeat())
        try:
            value = await spec.invoke(inp.args, inp.kwargs)
        except Exception as err:
            exc_type = type(err).__name__
            raise ApplicationError(
                clip(str(err)),
                {"attempt": attempt},
                type=exc_type,
                non_retryable=exc_type in spec.options.non_retryable,
            ) from err
        finally:
            beating.cancel()
            _current.reset(token)
        try:
            value = to_jsonable_python(value)
            size = len(to_json(value))
        except Exception as err:
            raise ApplicationError(
                f"{spec.name} returned a value that cannot be sent to the code: {clip(str(err), 500)}",
                {"attempt": attempt},
                type="TypeError",
                non_retryable=True,
            ) from err
        if size > MAX_VALUE_BYTES:
            raise ApplicationError(
                f"{spec.name} returned {human_bytes(size)}, over the {human_bytes(MAX_VALUE_BYTES)} limit "
                "for one value: return less (a page, a summary, a file reference)",
                {"attempt": attempt},
                type="ValueError",
                non_retryable=True,
            )
        return ToolOutput(value=value, attempt=attempt, size=size)

    return run_tool


async def _heartbeat() -> None:
    """Heartbeat while the tool runs: the server answers a heartbeat with the news that the
    execution was cancelled, which then cancels an async tool where it awaits (a sync tool's
    thread runs to its end, and its result is dropped)."""
    while True:
        activity.heartbeat()
        await asyncio.sleep(1.0)


def tool_activities(registry: ToolRegistry) -> list[Callable[..., Any]]:
    return [make_tool_activity(spec) for spec in registry]
