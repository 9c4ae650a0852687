"""A parked run holds nothing that costs: ``Parking``, the part of ``CodeExecutionWorkflow``
that parks its sandbox while the run waits for a person.

Where the provider keeps processes through a pause (Docker, E2B; Blaxel's standby) the
sandbox is paused and kept; a restore later finds it, or replays the journal when it is gone.
Where it cannot (Modal; a pause that failed), the sandbox keeps running for the park grace
period (``CODEMODE_PARK_RELEASE_AFTER``, which the park activity reports) and is then
released; when the run is decided, its next step replays the journal in a fresh sandbox, and
the history says why. Workflow code: deterministic, and patched (``PARK_PATCH``) so that a
run recorded before this existed replays on its old path (one pause activity, nothing after).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import ParkResult, ReleaseInput
    from codemode.workflows.step_activities import park_sandbox, release_sandbox, suspend_sandbox
    from codemode.workflows.step_state import Held
    from codemode.workflows.summary import in_words
    from codemode.workflows.usage import UsageMeter
    from codemode.workflows.versions import Versions

#: The patch marker of parking with a report and a release after the grace period.
PARK_PATCH = "park-release-after-grace"
#: The patch marker of releasing a session cell's parked sandbox too (issue 39b): a cell
#: recorded before it keeps its session's sandbox running while parked.
PARK_CELL_PATCH = "park-release-cell-after-grace"


class Parking:
    def __init__(self, usage: UsageMeter, versions: Versions) -> None:
        self.usage = usage
        self.versions = versions
        self._releasing: asyncio.Task[None] | None = None
        #: Why the parked sandbox was released (the next step replays), until it is taken.
        self._released: str | None = None

    async def park(self, held: Held, runtime: str, waiting: Callable[[], bool], *, cell: bool) -> None:
        """Park the sandbox of a run about to wait for a person (once per step). ``waiting``
        says whether the run still waits. A session's cell parks its session's sandbox: when
        released, the next step rebuilds the session (its saved state is gone with the sandbox,
        so its earlier cells are replayed) and replays the cell's journal in it."""
        if not held.holds_compute or held.suspended or held.checkpoint is None:
            return
        held.suspended = True
        info = workflow.info()
        inp = ReleaseInput(
            execution_id=info.workflow_id,
            runtime=runtime,
            first_run_id=info.first_execution_run_id,
            checkpoint=held.checkpoint,
            mode="suspend",
        )
        if not self.versions.has(PARK_PATCH):
            await suspend_sandbox(inp)
            return
        parked = await park_sandbox(inp)
        self.usage.parked(parked.parked_as)
        if (
            parked.parked_as == "running"
            and parked.release_after is not None
            and (not cell or self.versions.has(PARK_CELL_PATCH))
        ):
            # (``cell`` stays False: the release frees the sandbox, which is the session's too)
            release = inp.model_copy(update={"mode": "discard"})
            self._releasing = asyncio.create_task(self._release_after(release, parked, waiting))

    async def _release_after(self, inp: ReleaseInput, parked: ParkResult, waiting: Callable[[], bool]) -> None:
        assert parked.release_after is not None
        try:
            await workflow.wait_condition(lambda: not waiting(), timeout=timedelta(seconds=parked.release_after))
            return  # decided within the grace period: the sandbox is still there
        except TimeoutError:
            pass
        after = in_words(parked.release_after)
        await release_sandbox(inp, None, summary=f"release the parked sandbox after {after}: {parked.why}")
        self._released = f"its sandbox was released after {after} parked ({parked.why})"
        self.usage.released()

    async def settle(self) -> str | None:
        """Before the run's next step: wait for a release under way; why the sandbox was
        released (the step must replay the journal), or None."""
        task, self._releasing = self._releasing, None
        if task is not None:
            await task
        released, self._released = self._released, None
        return released

    def cancel(self) -> None:
        """The run ends: no release is waiting any more (the run's own release frees all)."""
        if self._releasing is not None and not self._releasing.done():
            self._releasing.cancel()
        self._releasing = None
