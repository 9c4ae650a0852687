"""Each tool as its own activity type, named after the tool, with its own retry policy.

The policy's attempts and timeout are applied by the workflow when it schedules the
activity; whether a failure is final is decided here, where the exception is known: a
failure is raised as an ``ApplicationError`` carrying the exception's type name, its message
and the attempt number (non-retryable when its type is in the tool's ``non_retryable``), so
the code can later see ``ValueError("unknown city: Atlantis")``. A tool that knows better
raises ``ToolFailure`` with the type and the retry decision itself (an MCP tool does).

A result larger than ``MAX_VALUE_BYTES`` is refused here, as a ``ValueError`` the code can
catch, rather than sent as a payload no store or server should have to hold.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic_core import to_json, to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.runtimes.journal_replay import JournalEntry

from .models import MAX_VALUE_BYTES, RECORD_RESULT_BYTES, ToolInput, ToolOutput, clip, human_bytes
from .records import preview
from .tools import CallContext, ToolFailure, ToolRegistry, ToolSpec, _current

if TYPE_CHECKING:
    from .sandbox_steps import SandboxActivities

log = logging.getLogger(__name__)


def make_tool_activity(spec: ToolSpec, sandbox: SandboxActivities | None = None) -> Callable[..., Any]:
    """The tool's activity. With ``sandbox`` (a worker that runs sandbox steps too), a call
    scheduled with ``ToolInput.then`` also runs the sandbox step that follows it (one
    activity per tool call, no resume step in the workflow: issue 11)."""

    @activity.defn(name=spec.name)
    async def run_tool(inp: ToolInput) -> ToolOutput:
        info = activity.info()
        attempt = info.attempt
        token = _current.set(CallContext(info.workflow_id or "", inp.call_id, spec.name, attempt))
        beating = asyncio.create_task(_heartbeat())
        try:
            if inp.then is not None and inp.timeout_seconds:
                value = await _within(spec, inp, inp.timeout_seconds, attempt)
            else:
                value = await spec.invoke(inp.args, inp.kwargs)
        except _OwnTimeout as err:
            raise ApplicationError(
                str(err),
                {"attempt": attempt},
                type="TimeoutError",
                non_retryable="TimeoutError" in spec.options.non_retryable,
            ) from None
        except ToolFailure as err:
            raise ApplicationError(
                clip(err.message), {"attempt": attempt}, type=err.type_name, non_retryable=not err.retryable
            ) from err
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
            text = to_json(value)
            size = len(text)
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
        if size > RECORD_RESULT_BYTES:  # the workflow passes it on as text, never parsing it
            out = ToolOutput(value_json=text.decode(), preview=preview(value), attempt=attempt, size=size)
        else:
            out = ToolOutput(value=value, attempt=attempt, size=size)
        if inp.then is not None:
            if sandbox is None:
                out.unfused = "this worker runs tools only"
            else:
                answer = JournalEntry(
                    call_id=inp.call_id, function_name=spec.name, args=inp.args, kwargs=inp.kwargs, result=value
                )
                spent = size + len(to_json([inp.args, inp.kwargs])) if inp.then.defer_bytes > 0 else 0
                try:
                    out.step = await sandbox.step_after_tool(inp.then, info.workflow_id or "", answer, spent)
                except asyncio.TimeoutError:
                    out.unfused = f"the step after the call took over {inp.then.step_timeout:g}s"
                except Exception as err:  # in-band: the result stands, the workflow runs the step
                    out.unfused = clip(f"{type(err).__name__}: {err}", 500)
                if out.unfused:
                    log.info("call %s: step after the tool left to the workflow: %s", inp.call_id, out.unfused)
        return out

    return run_tool


async def _within(spec: ToolSpec, inp: ToolInput, seconds: float, attempt: int) -> Any:
    """Run the tool under its own timeout, as the activity's start-to-close timeout would
    (a ``TimeoutError`` the retry policy retries), when the activity's own timeout also
    covers the step after it. No task of its own: the tool runs in the activity's."""
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await spec.invoke(inp.args, inp.kwargs)
    except TimeoutError:
        if scope.expired():
            raise _OwnTimeout(f"{spec.name} timed out after {seconds:g}s (attempt {attempt})") from None
        raise  # the tool's own TimeoutError


class _OwnTimeout(Exception):
    """The tool overran its own timeout (not a TimeoutError the tool raised itself)."""


async def _heartbeat() -> None:
    """Heartbeat while the tool runs: the server answers a heartbeat with the news that the
    execution was cancelled, which then cancels an async tool where it awaits (a sync tool's
    thread runs to its end, and its result is dropped). The first one after a second: a
    quick call sends none (each is a request to the server, issue 11)."""
    while True:
        await asyncio.sleep(1.0)
        activity.heartbeat()


def tool_activities(registry: ToolRegistry, sandbox: SandboxActivities | None = None) -> list[Callable[..., Any]]:
    return [make_tool_activity(spec, sandbox) for spec in registry]
