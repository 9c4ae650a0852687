"""Decoding a history's payloads and failures for the audit (``client/histories/audit.py``) and the
progress a follower shows (``client/call_progress.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import HistoryEvent
from temporalio.converter import DataConverter

from codemode.activities.records import ErrorInfo


class PayloadDecoder:
    """Payloads to values through the full data converter: external-storage references are
    fetched from the object store (and a codec, when one is configured, applied)."""

    def __init__(self, converter: DataConverter) -> None:
        self.converter = converter

    async def __call__(self, payloads: Payloads | Iterable[Payload], type_hint: Any = None) -> Any:
        items = list(payloads.payloads if isinstance(payloads, Payloads) else payloads)
        if not items:
            return None
        items = items[:1]
        try:
            return (await self.converter.decode(items, [type_hint] if type_hint else None))[0]
        except Exception:
            try:
                return (await self.converter.decode(items, None))[0]
            except Exception as err:  # a blob past retention, a key we do not hold
                return _Undecodable(f"{type(err).__name__}: {err}")

    async def failure(self, failure: Failure) -> Failure:
        """A copy of ``failure`` with the message and stack trace an encrypting converter moved
        into its encoded attributes put back, at every level of causes."""
        out = Failure()
        out.CopyFrom(failure)
        f: Failure | None = out
        while f is not None:
            if f.HasField("encoded_attributes"):
                attrs = await self([f.encoded_attributes])
                if isinstance(attrs, dict):
                    f.message = str(attrs.get("message") or f.message)
                    f.stack_trace = str(attrs.get("stack_trace") or "")
                elif isinstance(attrs, _Undecodable):
                    f.message = f"(encrypted failure: {attrs})"
            f = f.cause if f.HasField("cause") else None
        return out


class _Undecodable(str):
    """A payload that could not be read; shown in its place."""


def _time(event: HistoryEvent) -> datetime:
    return event.event_time.ToDatetime(tzinfo=UTC)


def tool_error(failure: Failure) -> ErrorInfo:
    """The tool's own error: the innermost application failure, or a timeout."""
    f = failure
    while f.HasField("activity_failure_info") and f.HasField("cause"):
        f = f.cause
    if f.HasField("application_failure_info"):
        return ErrorInfo(type=f.application_failure_info.type or "RuntimeError", message=f.message, kind="tool")
    if f.HasField("timeout_failure_info"):
        return ErrorInfo(type="TimeoutError", message=f.message or "activity timed out", kind="tool")
    return ErrorInfo(type="RuntimeError", message=f.message, kind="tool")


def _as(model: type[BaseModel], value: Any) -> Any:
    if isinstance(value, model):
        return value
    try:
        return model.model_validate(value)
    except ValidationError:
        return None
