"""What every benchmark tool does besides returning its argument, the same in every system
and process: wait the tools' delay, count the call, and (for the cache-pressure phase) ask its
worker to evict the run after every k-th call.

Imports nothing of ``codemode`` (the peer's environment imports it too)."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from temporalio import activity

#: Seconds each tool call waits (the benchmark sets it; the same for every system).
delay = 0.005
#: Ask the worker to evict the run after every ``evict_every``-th call it makes (0: never).
evict_every = 0
#: The worker whose workflow cache holds the runs (set by whoever runs the worker).
worker: Any = None
#: Calls per workflow id (counted where the tool runs; read by the benchmark).
calls: collections.Counter[str] = collections.Counter()
_per_run: collections.Counter[str] = collections.Counter()
#: Per workflow id, the perf_counter time of each call (only for ids in ``timed``).
times: dict[str, list[float]] = {}
timed: set[str] = set()
evictions = 0


async def called() -> None:
    info = activity.info()
    wid, run_id = info.workflow_id or "", info.workflow_run_id or ""
    if wid in timed:
        times.setdefault(wid, []).append(time.perf_counter())
    if delay:
        await asyncio.sleep(delay)
    calls[wid] += 1
    if evict_every and worker is not None:
        _per_run[run_id] += 1
        if _per_run[run_id] % evict_every == 0:
            evict(run_id)


def evict(run_id: str) -> None:
    """Ask the worker's core to drop ``run_id`` from its workflow cache: its next workflow
    task replays its history from the start (what a restart or a full cache costs a run)."""
    global evictions
    bridge = getattr(worker, "_bridge_worker", None)
    if bridge is not None:
        bridge.request_workflow_eviction(run_id)
        evictions += 1


def reset() -> None:
    global evictions
    calls.clear()
    _per_run.clear()
    times.clear()
    timed.clear()
    evictions = 0
