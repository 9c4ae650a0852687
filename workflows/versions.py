"""Which version of our workflow code a run was recorded with, read once, first thing in the run.

Why only there (issue 43): ``workflow.patched()`` answers from the patch markers of the workflow
task being replayed, so the same call must happen in the same workflow task live and on replay.
Code that runs after a local activity does not always: when Core answers a query while a local
activity's result waits for the workflow, it completes the task with the activity's marker and
hands the result over in the next task (``managed_run.rs``, "pending LA resolutions, and we're
responding to a query"). Live, the code after the activity runs in that next task; on replay, in
the task of the marker. A ``patched()`` call there returns False on replay where it returned True
live, and the run fails with "Non-deprecated patch marker encountered ... but there is no
corresponding change command" (``tests/workflows/test_replay_stress.py`` reproduces it every
time). In a run's first activation nothing has run yet, so a marker made there is found there.

A run recorded since then carries one marker, ``GENERATION_PATCH``, made at its start: every
change older than it counts as taken without a marker of its own, and every change newer than it
is read here too (a new generation), never in the middle of a run. A run recorded before it asks
each older patch where it always did (``Versions.has``), so its history replays as it was made.
Workflow code: deterministic.
"""

from __future__ import annotations

from temporalio import workflow

#: The marker of runs recorded since issue 43: notifications started by activities (not local
#: ones), decisions for a call that does not wait yet held until it does, and every earlier
#: patch taken. A newer generation gets a new name, read in ``Versions.begin`` beside this one.
GENERATION_PATCH = "generation-43"


class Versions:
    """The changes a run takes. ``begin()`` is the first thing its workflow's ``__init__`` does
    (the first activation, before any signal handler or ``run``)."""

    def __init__(self) -> None:
        self._current = False

    def begin(self) -> None:
        """Read the generation marker (first activation only: see the module's docstring)."""
        self._current = workflow.patched(GENERATION_PATCH)

    @property
    def current(self) -> bool:
        """Whether the run was recorded by this generation of the code (or a later one)."""
        return self._current

    def has(self, patch_id: str) -> bool:
        """Whether the run takes ``patch_id``, a change from before the generation: always in a
        run of this generation (no marker), else asked where the run always asked it."""
        return self._current or workflow.patched(patch_id)
