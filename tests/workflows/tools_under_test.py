"""Tools used by the workflow tests. Every call appends start/end events to the JSONL file
named by $CODEMODE_TEST_EVENTS, so a test can see every attempt across worker processes."""

from __future__ import annotations

import asyncio
import json
import os
import time
from datetime import timedelta

from codemode.activities import current_call, tool


def _event(kind: str, **extra: object) -> None:
    path = os.environ.get("CODEMODE_TEST_EVENTS")
    if not path:
        return
    call = current_call()
    rec = {
        "event": kind,
        "execution_id": call.execution_id,
        "call_id": call.call_id,
        "tool": call.tool,
        "attempt": call.attempt,
        "pid": os.getpid(),
        "t": time.time(),
        **extra,
    }
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")
        f.flush()
        os.fsync(f.fileno())


@tool(timeout=timedelta(seconds=4), max_attempts=10)
def slow_step(i: int, seconds: float = 0.6) -> int:
    """Takes a while, so a worker can be killed in the middle of it."""
    _event("start", arg=i)
    time.sleep(seconds)
    _event("end", arg=i)
    return i * 10


@tool(max_attempts=3)
def flaky(key: str) -> str:
    """Fails on its first two attempts, then succeeds."""
    call = current_call()
    _event("start", arg=key)
    if call.attempt < 3:
        raise ConnectionError(f"transient failure on attempt {call.attempt}")
    _event("end", arg=key)
    return f"ok:{key}"


@tool(requires_approval=True)
def transfer(to: str, amount: float) -> dict:
    """Moves money: needs a person's approval."""
    _event("start", arg=to)
    return {"to": to, "amount": amount, "ref": current_call().idempotency_key}


async def fetch(i: int) -> int:
    """Async, for asyncio.gather."""
    _event("start", arg=i)
    await asyncio.sleep(0.05)
    return i + 100


def lookup(city: str) -> dict:
    if city == "Atlantis":
        raise ValueError(f"unknown city: {city}")
    return {"city": city}


def fetch_rows(n: int) -> list[dict]:
    """n rows of a realistic table (about 50 bytes of JSON each): 40,000 make 2 MB."""
    return [{"id": i, "region": ("north", "south", "east", "west")[i % 4], "amount": i % 997} for i in range(n)]


def sales_rows(n: int) -> list[dict]:
    """n sales (city, amount, ISO day), the same every time: the package matrix's table."""
    _event("start", arg=f"rows:{n}")
    cities = ("Paris", "Oslo", "Lima", "Rome", "Cairo")
    rows = [
        {"city": cities[i % 5], "amount": round((i * 37 % 1000) / 7, 2), "day": f"2024-01-{1 + i % 28:02d}"}
        for i in range(n)
    ]
    _event("end", arg=f"rows:{n}")
    return rows


def count(xs: list) -> int:
    """Takes a large argument."""
    return len(xs)


def blob(megabytes: int) -> str:
    """A string of that many megabytes: past the per-value cap when asked for too much."""
    return "x" * (megabytes * 1024 * 1024)


def add(a: int, b: int) -> int:
    return a + b


@tool(requires_approval=True)
async def wire(to: str, amount: float) -> dict:
    """Async and needs approval: two gathered calls park together."""
    _event("start", arg=to)
    return {"to": to, "amount": amount}


async def nap(seconds: float) -> float:
    """Async and slow: cancelled where it awaits when the execution is cancelled."""
    _event("start", arg=seconds)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _event("cancelled", arg=seconds)
        raise
    _event("end", arg=seconds)
    return seconds
