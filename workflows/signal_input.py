"""A decision signal's input, read by the workflow itself so that it is never dropped.

The SDK converts a signal's input before the handler runs and, when it cannot, logs the error
and drops the signal ("Failed deserializing signal input ... dropping the signal"). For
``approve`` and ``deny`` that would lose a person's decision with one log line while the call
waits on: a payload encrypted under keys this worker does not hold (a client with
``CODEMODE_ENCRYPTION_KEYS``, a worker without), or encoded by a codec only the sender has.
The decision handlers take the raw payload and convert it here; an input this worker cannot
read fails the workflow task instead (not the run), with a message that says why. Temporal
retries the task, visibly (the UI shows the failure and its message), until a worker that can
read the input runs it; the decision then counts. A decision that is read but malformed is
another matter: the run records it as ignored, with the reason (``workflows/approvals.py``)."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue


class UnreadableDecision(RuntimeError):
    """Not an ``ApplicationError``, on purpose: it fails the workflow task, never the run."""


def decision_input(signal: str, raw: RawValue | None) -> Any:
    """The signal's input as the handler would have had it (``Any``: JSON values), or raises
    ``UnreadableDecision`` (its message begins "Failed decoding", as the SDK's own do)."""
    if raw is None:
        return None
    try:
        return workflow.payload_converter().from_payload(raw.payload, Any)
    except Exception as err:  # noqa: BLE001 - any conversion error: the decision is kept, the task retried
        encoding = raw.payload.metadata.get("encoding", b"").decode(errors="replace")
        hint = (
            " (encrypted: this worker has no CODEMODE_ENCRYPTION_KEYS, or not the key it was sealed with)"
            if encoding == "binary/encrypted"
            else ""
        )
        raise UnreadableDecision(
            f"Failed decoding the {signal} signal's input, encoding {encoding or 'none'}{hint}: "
            f"{type(err).__name__}: {err}. The decision is kept in the history; this task is retried "
            "until a worker that can read it runs it."
        ) from None
