"""A tool's compensation and reconcile, each an activity of its own (issue 47).

``compensate:<tool>`` undoes one call of the tool: the tool's ``Compensation`` gets the call's
arguments (by parameter name) and its result, with ``current_call().idempotency_key`` set to
``<execution>/<call>/compensate`` on every attempt, so the other side can recognise a repeat.
Its retry policy is its own (``UndoSpec``), applied by the workflow when it schedules it.

``reconcile:<tool>`` asks about one call whose outcome a crash or a timeout hid (an attempt cut
off mid-way): the tool's ``reconcile`` gets the call's arguments, with the call's own key
(``<execution>/<call>``), and says whether it was applied and, if so, its result.

A failure is raised like a tool's (``tool_activity.py``): an ``ApplicationError`` with the
exception's type name, final when the compensation lists that type as non-retryable.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic_core import to_jsonable_python
from temporalio import activity
from temporalio.exceptions import ApplicationError

from . import call_attempts
from .models import CompensateInput, CompensateOutput, ReconcileOutput, clip
from .tools import (
    COMPENSATE_PREFIX,
    DEFAULT_NON_RETRYABLE,
    RECONCILE_PREFIX,
    CallContext,
    Reconciled,
    ToolFailure,
    ToolRegistry,
    ToolSpec,
    _current,
)


def named_arguments(spec: ToolSpec, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name (a CLI command's that only lists: its keywords,
    positional ones by index), as a compensation and a reconcile get them."""
    try:
        return spec.signature.bind(args, kwargs)
    except (TypeError, ValueError):
        return {**{str(i): a for i, a in enumerate(args)}, **kwargs}


async def _served(
    spec: ToolSpec,
    inp: CompensateInput,
    phase: str,
    non_retryable: tuple[str, ...],
    run: Callable[[dict[str, Any]], Awaitable[Any]],
) -> Any:
    """Run ``run`` (a compensation or a reconcile) as the call ``inp`` names, failures raised
    the way the workflow reads a tool's."""
    attempt = activity.info().attempt
    token = _current.set(CallContext(inp.execution_id, inp.call_id, spec.name, attempt, phase))  # type: ignore[arg-type]
    call_attempts.begin_attempt()
    beating = asyncio.create_task(_heartbeat())
    try:
        return await run(named_arguments(spec, inp.args, inp.kwargs))
    except ToolFailure as err:
        raise ApplicationError(
            clip(err.message), {"attempt": attempt}, type=err.type_name, non_retryable=not err.retryable
        ) from err
    except Exception as err:
        exc_type = type(err).__name__
        raise ApplicationError(
            clip(f"{type(err).__name__}: {err}" if not str(err) else str(err)),
            {"attempt": attempt},
            type=exc_type,
            non_retryable=exc_type in non_retryable,
        ) from err
    finally:
        beating.cancel()
        _current.reset(token)


def make_compensation_activity(spec: ToolSpec) -> Callable[..., Any]:
    comp = spec.compensation
    assert comp is not None

    @activity.defn(name=COMPENSATE_PREFIX + spec.name)
    async def compensate(inp: CompensateInput) -> CompensateOutput:
        result = json.loads(inp.result_json) if inp.result_json is not None else inp.result
        done = await _served(spec, inp, "compensate", comp.non_retryable, lambda args: comp.run(args, result))
        return CompensateOutput(compensated=done is not False, attempt=activity.info().attempt)

    return compensate


def make_reconcile_activity(spec: ToolSpec) -> Callable[..., Any]:
    check = spec.reconciler
    assert check is not None

    async def ask(args: dict[str, Any]) -> Any:
        if asyncio.iscoroutinefunction(check):
            return await check(args)
        return await asyncio.to_thread(check, args)

    @activity.defn(name=RECONCILE_PREFIX + spec.name)
    async def reconcile(inp: CompensateInput) -> ReconcileOutput:
        found = await _served(spec, inp, "reconcile", DEFAULT_NON_RETRYABLE, ask)
        attempt = activity.info().attempt
        if isinstance(found, Reconciled):
            result = to_jsonable_python(found.result, fallback=repr) if found.applied else None
            return ReconcileOutput(applied=found.applied, result=result, attempt=attempt)
        return ReconcileOutput(applied=bool(found), attempt=attempt)

    return reconcile


def undo_activities(registry: ToolRegistry) -> list[Callable[..., Any]]:
    """The compensation and reconcile activities of every tool that declares them."""
    out: list[Callable[..., Any]] = []
    for spec in registry:
        if spec.compensation is not None:
            out.append(make_compensation_activity(spec))
        if spec.reconciler is not None:
            out.append(make_reconcile_activity(spec))
    return out


async def _heartbeat() -> None:
    """As a tool's: a cancellation of the rollback reaches an async compensation where it awaits."""
    while True:
        await asyncio.sleep(1.0)
        activity.heartbeat()
