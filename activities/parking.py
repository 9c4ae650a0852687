"""Parking a run's sandbox while the run waits for a person (``SandboxActivities.park``).

``sandbox_park`` pauses the sandbox where the provider keeps its processes through a pause
(Docker, E2B; Blaxel puts an idle sandbox in standby on its own) and says what happened,
so the history never calls "paused" a sandbox that kept running. Where the sandbox keeps
running (Modal; any pause that failed) it says for how long it may
(``runtimes/runner/parking.py``, ``CODEMODE_PARK_RELEASE_AFTER``): the workflow then releases
it if the run is still waiting, and the run continues on approval by journal replay in a
fresh sandbox.
"""

from __future__ import annotations

import logging
from typing import Any

from codemode.runtimes.errors import SandboxError
from codemode.runtimes.runner.parking import DEFAULT_RELEASE_AFTER, release_after

from .checkpoints import CheckpointUnusable, step_scope
from .live_runs import cache_key
from .models import ParkResult, ReleaseInput
from .sandbox_host import SandboxHost

log = logging.getLogger(__name__)

_HOW = {
    "paused": "{name} paused it: no compute while the run waits, its processes kept",
    "standby": "{name} puts it in standby once idle: no compute while the run waits, its processes kept",
    "running": "{name} cannot pause a sandbox and keep its processes",
}


class Parking:
    """What the ``sandbox_park`` activity does."""

    def __init__(self, host: SandboxHost) -> None:
        self.host = host

    async def park(self, inp: ReleaseInput) -> ParkResult:
        """Pause the sandbox of a run about to wait for a person, or say it keeps running
        and for how long it may (``release_after``)."""
        if inp.checkpoint is None:
            return ParkResult(parked_as="nothing", why="the run holds no checkpoint")
        live = self.host.live.snapshots.pop(cache_key(inp.execution_id, inp.checkpoint), None)
        if live is not None:  # its checkpoint is current: closing only detaches
            await live.execution.close()
        runtime = self.host.runtime(inp.runtime)
        try:
            blob = await self.host.checkpoints.load(step_scope(inp.execution_id, inp.first_run_id), inp.checkpoint)
        except CheckpointUnusable as err:
            return ParkResult(parked_as="nothing", why=f"its checkpoint is gone: {err}")
        parks_as = getattr(runtime, "parks_as", "running")
        why = _HOW[parks_as].format(name=runtime.name)
        try:
            await runtime.suspend(blob)
        except SandboxError as err:  # it keeps running: released after the grace period instead
            parks_as, why = "running", f"pausing it failed: {err}"
        if parks_as != "running":
            return ParkResult(parked_as=parks_as, why=why)
        after, why = running_grace(runtime, why)
        return ParkResult(parked_as="running", why=why, release_after=after)


def running_grace(runtime: Any, why: str) -> tuple[float, str]:
    """How long a sandbox that keeps running while nothing uses it may (the park grace
    period of ``runtime``), and why it runs (with the error of a bad setting)."""
    try:
        return release_after(runtime.name, getattr(runtime, "park_release_after", None)), why
    except ValueError as err:  # a bad setting must not leave a sandbox running for days
        log.error("%s; releasing parked sandboxes after %gs", err, DEFAULT_RELEASE_AFTER)
        return DEFAULT_RELEASE_AFTER, f"{why} ({err})"


def cannot_pause(runtime: Any) -> str:
    """Why ``runtime``'s sandbox keeps running while parked."""
    return _HOW["running"].format(name=runtime.name)
