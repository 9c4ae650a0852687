"""Paired samples for the tool-call benchmarks (``mcp_tools.py``, ``cli_tools.py``): ours and
its floor measured back to back, the order alternating (the dev server's latency drifts, so
only paired samples compare), ratios per pair, their median the figure."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

Work = Callable[[], Awaitable[object]]


async def timed(work: Work, n: int) -> float:
    """Seconds per call of ``work`` (which makes ``n`` calls)."""
    t0 = time.perf_counter()
    await work()
    return (time.perf_counter() - t0) / n


@dataclass
class Pairs:
    ours: list[float] = field(default_factory=list)
    #: One list per floor part (an activity, a direct call...), the pairs' samples.
    floors: list[list[float]] = field(default_factory=list)
    #: The samples of the comparisons shown beside (a Python tool's call), one list each.
    beside: list[list[float]] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)


async def run_pairs(n: int, repeat: int, ours: Work, floors: Sequence[Work], beside: Sequence[Work]) -> Pairs:
    """``repeat`` pairs of ``ours`` against the sum of ``floors`` (each making ``n`` calls),
    each pair followed by the ``beside`` runs."""
    pairs = Pairs(floors=[[] for _ in floors], beside=[[] for _ in beside])
    for r in range(repeat):
        if r % 2:
            parts = [await timed(f, n) for f in floors]
            o = await timed(ours, n)
        else:
            o = await timed(ours, n)
            parts = [await timed(f, n) for f in floors]
        for samples, work in zip(pairs.beside, beside):
            samples.append(await timed(work, n))
        pairs.ours.append(o)
        for samples, part in zip(pairs.floors, parts):
            samples.append(part)
        pairs.ratios.append(o / sum(parts))
    return pairs


def ms(samples: Sequence[float]) -> list[float]:
    return [round(x * 1000, 2) for x in samples]


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000
