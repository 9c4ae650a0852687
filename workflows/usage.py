"""What an execution's sandboxes cost: seconds running and paused, sandboxes created, journal
replays, sandboxes released while parked (``ExecutionOutcome.usage``).

Counted in the workflow from recorded events and ``workflow.now()`` (deterministic, no
command of its own): a sandbox runs from the start of the step that needs it to the end of
that step, and, for a runtime whose sandbox outlives its steps (a cloud sandbox, a container:
``StepResult.holds_compute``), on between steps until it is paused, released or freed. While
the run waits for a person, a paused sandbox (or one in standby) counts as paused; one that
cannot pause counts as running until it is released after the grace period.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from temporalio import workflow

__all__ = ("SandboxUsage", "UsageMeter")


class SandboxUsage(BaseModel):
    """One runtime's share of an execution's usage."""

    #: Seconds a sandbox of this execution was running (compute a provider bills).
    running_seconds: float = 0.0
    #: Seconds one was paused (or in standby) while the run waited for a person.
    paused_seconds: float = 0.0
    sandboxes_created: int = 0
    #: Steps that rebuilt the run by replaying its journal in a fresh sandbox.
    replays: int = 0
    #: Sandboxes that could not pause, released after the park grace period.
    released_while_parked: int = 0


class UsageMeter:
    """The meter of one execution (carried over continue-as-new as ``SandboxUsage``)."""

    def __init__(self, runtime: str, carried: SandboxUsage | None = None) -> None:
        self.runtime = runtime
        self.usage = carried.model_copy() if carried is not None else SandboxUsage()
        self._running_since: datetime | None = None
        self._paused_since: datetime | None = None

    def step_began(self) -> None:
        """A step is scheduled: its sandbox runs (again) from now."""
        now = workflow.now()
        if self._paused_since is not None:
            self.usage.paused_seconds += (now - self._paused_since).total_seconds()
            self._paused_since = None
        if self._running_since is None:
            self._running_since = now

    def step_ended(self, via: str, holds_compute: bool, more: bool) -> None:
        """A step's result: how it got its sandbox, and whether the sandbox stays up (it
        holds compute and the code goes on)."""
        if via in ("started", "replayed"):
            self.usage.sandboxes_created += 1
        if via == "replayed":
            self.usage.replays += 1
        if not (holds_compute and more):
            self._stop_running()

    def parked(self, parked_as: str) -> None:
        """The run waits for a person: its sandbox is ``paused``, in ``standby``, or keeps
        ``running``."""
        if parked_as in ("paused", "standby"):
            self._stop_running()
            self._paused_since = workflow.now()
        elif parked_as == "nothing":
            self._stop_running()

    def released(self) -> None:
        """The parked sandbox that kept running was released (the grace period passed)."""
        self._stop_running()
        self.usage.released_while_parked += 1

    def ended(self) -> None:
        """The execution is over and its sandbox freed."""
        self._stop_running()
        if self._paused_since is not None:
            self.usage.paused_seconds += (workflow.now() - self._paused_since).total_seconds()
            self._paused_since = None

    def snapshot(self) -> SandboxUsage:
        """The usage so far, counting what is under way until now."""
        now = workflow.now()
        usage = self.usage.model_copy()
        if self._running_since is not None:
            usage.running_seconds += (now - self._running_since).total_seconds()
        if self._paused_since is not None:
            usage.paused_seconds += (now - self._paused_since).total_seconds()
        usage.running_seconds = round(usage.running_seconds, 3)
        usage.paused_seconds = round(usage.paused_seconds, 3)
        return usage

    def by_runtime(self) -> dict[str, SandboxUsage]:
        return {self.runtime: self.snapshot()}

    def _stop_running(self) -> None:
        if self._running_since is not None:
            self.usage.running_seconds += (workflow.now() - self._running_since).total_seconds()
            self._running_since = None
