"""Tools that can be undone, for the undo tests (issue 47). A small bank kept in a JSON-lines
ledger ($CODEMODE_TEST_LEDGER): a transfer adds a line under its idempotency key, a refund
another; every call, compensation and reconcile appends an event to $CODEMODE_TEST_EVENTS, so a
test sees each attempt across worker processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import timedelta
from typing import Any

from codemode.activities import current_call, tool
from codemode.activities.tools import Reconciled, compensation
from tests.workflows.tools_under_test import _event as record


def _event(kind: str, **extra: Any) -> None:
    record(kind, key=current_call().idempotency_key, **extra)


def _ledger(kind: str, key: str, **extra: Any) -> None:
    path = os.environ.get("CODEMODE_TEST_LEDGER")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"kind": kind, "key": key, **extra}) + "\n")
            f.flush()
            os.fsync(f.fileno())


def _ledger_lines() -> list[dict[str, Any]]:
    path = os.environ.get("CODEMODE_TEST_LEDGER")
    if not path or not os.path.exists(path):
        return []
    return [json.loads(line) for line in open(path).read().splitlines() if line.strip()]


def refund(args: dict[str, Any], result: dict[str, Any]) -> None:
    """Undo a transfer: pay the amount back (slow when $UNDO_SECONDS says, to kill a worker in it)."""
    call = current_call()
    _event("compensate", transfer_id=result["transfer_id"], to=args["to"])
    time.sleep(float(os.environ.get("UNDO_SECONDS", "0")))
    _ledger("refund", call.idempotency_key, transfer_id=result["transfer_id"], amount=args["amount"])
    _event("compensated", transfer_id=result["transfer_id"], to=args["to"])


@tool(compensate=compensation(refund, timeout=timedelta(seconds=5), max_attempts=5))
def transfer(to: str, amount: int) -> dict:
    """Moves money to ``to``; a rollback refunds it."""
    key = current_call().idempotency_key
    _event("call", to=to)
    _ledger("transfer", key, to=to, amount=amount)
    return {"transfer_id": key, "to": to, "amount": amount}


@tool(requires_approval=True, compensate=refund)
def payout(to: str, amount: int) -> dict:
    """Pays out: a person approves it first; a rollback refunds it."""
    key = current_call().idempotency_key
    _event("call", to=to)
    _ledger("transfer", key, to=to, amount=amount)
    return {"transfer_id": key, "to": to, "amount": amount}


def _flaky_undo(args: dict[str, Any], result: Any) -> None:
    call = current_call()
    _event("compensate", to=args["to"])
    if call.attempt < 3:
        raise ConnectionError(f"the bank is busy (attempt {call.attempt})")
    _event("compensated", to=args["to"])


@tool(compensate=compensation(_flaky_undo, max_attempts=5))
def hold(to: str) -> str:
    """Its compensation fails twice, then works."""
    _event("call", to=to)
    return f"held:{to}"


def _broken_undo(args: dict[str, Any], result: Any) -> None:
    _event("compensate", to=args["to"])
    raise RuntimeError(f"the hold on {args['to']} cannot be released")


@tool(compensate=compensation(_broken_undo, max_attempts=2))
def lock(to: str) -> str:
    """Its compensation fails for good."""
    _event("call", to=to)
    return f"locked:{to}"


def _nothing(args: dict[str, Any], result: Any) -> bool:
    _event("compensate", to=args["to"])
    return False


@tool(compensate=_nothing)
def note(to: str) -> str:
    """Its compensation finds nothing to undo."""
    return f"noted:{to}"


def _was_booked(args: dict[str, Any]) -> Reconciled:
    key = current_call().idempotency_key
    _event("reconcile", slot=args["slot"])
    done = [line for line in _ledger_lines() if line["kind"] == "book" and line["key"] == key]
    return Reconciled(applied=bool(done), result={"slot": args["slot"], "booking": key} if done else None)


def _unbook(args: dict[str, Any], result: dict[str, Any]) -> None:
    _event("compensate", slot=args["slot"], booking=result["booking"])
    _ledger("unbook", current_call().idempotency_key, booking=result["booking"])


@tool(
    timeout=timedelta(seconds=3),
    max_attempts=1,
    compensate=_unbook,
    reconcile=_was_booked,
)
async def book(slot: str, seconds: float = 0.0, before: bool = False) -> dict:
    """Books a slot; slow when asked (a worker can be killed while it runs). ``before``: the
    booking is written before the wait (applied), else after it (not applied if killed)."""
    key = current_call().idempotency_key
    _event("call", slot=slot)
    if before:
        _ledger("book", key, slot=slot)
    await asyncio.sleep(seconds)
    if not before:
        _ledger("book", key, slot=slot)
    return {"slot": slot, "booking": key}


@tool(timeout=timedelta(seconds=3), max_attempts=1, compensate=_unbook)
async def book_blind(slot: str, seconds: float = 0.0) -> dict:
    """Like ``book`` without a reconcile: an interrupted call is reported, never undone blindly."""
    key = current_call().idempotency_key
    _event("call", slot=slot)
    _ledger("book", key, slot=slot)
    await asyncio.sleep(seconds)
    return {"slot": slot, "booking": key}


def _cancel_order(args: dict[str, Any], result: Any) -> None:
    _event("compensate", item=args["item"])


@tool(compensate=compensation(_cancel_order, requires_approval=True))
def order(item: str) -> str:
    """Orders an item; cancelling the order needs a person's approval."""
    _event("call", item=item)
    return f"ordered:{item}"


@tool(requires_approval=True)
def ask(question: str) -> str:
    """Waits for a person (no undo)."""
    return question


def lookup(key: str) -> str:
    """A read: nothing to undo."""
    return key.upper()


def _void_receipt(args: dict[str, Any], result: dict[str, Any]) -> None:
    _event("compensate", receipt=result["id"], lines=len(result["lines"]))


@tool(compensate=_void_receipt)
def receipt(n: int) -> dict:
    """A receipt of ``n`` lines of 100 characters: large results for the log's limits."""
    return {"id": current_call().idempotency_key, "lines": ["x" * 100] * n}
