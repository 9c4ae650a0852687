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

A run recorded since then carries one marker, its generation's (``GENERATIONS``), made at its
start: every change older than generation-43 counts as taken without a marker of its own, and
every change newer than it is a new generation, read here too, never in the middle of a run. A run recorded before it asks
each older patch where it always did (``Versions.has``), so its history replays as it was made.
Workflow code: deterministic.
"""

from __future__ import annotations

from temporalio import workflow

#: The marker of runs recorded since issue 43: notifications started by activities (not local
#: ones), decisions for a call that does not wait yet held until it does, and every earlier
#: patch taken.
GENERATION_PATCH = "generation-43"
#: Issue 45: approvals that hold against the code they guard. A run pins the approvers file it
#: first sees (and refuses gates from a worker without it, or with another), judges every
#: decision again against the file as it is when the decision arrives (an activity), reads the
#: door of a signal, and counts decisions by the strict rules of ``approvals/tally.py``.
GENERATION_45 = "generation-45"
#: Issue 47: the log of applied calls, rollbacks, "deny and roll back" (merged after 45, so a
#: generation-47 run also takes everything generation-45 does).
GENERATION_47 = "generation-47"
#: Issue 49: the python runtime's first step is a local activity, as Monty's steps are (its
#: first call no longer waits for an activity task and a second workflow task).
GENERATION_49 = "generation-49"
#: Every generation, oldest first. A change that alters the commands a run issues (or how it
#: judges what the history holds) gets a new name appended here and is asked with
#: ``Versions.since(name)``; a new run records only the newest marker (two events).
GENERATIONS: tuple[str, ...] = (
    GENERATION_PATCH,
    GENERATION_45,
    GENERATION_47,
    # Issue 48: saved snippets. The first step's prelude (its reference) rides every later step
    # and the continue-as-new carry; the outcome lists the snippets' versions
    # (``workflows/snippet_state.py``). No command changes; a run records which code it ran on.
    "generation-48",
    GENERATION_49,
)


class Versions:
    """The changes a run takes. ``begin()`` is the first thing its workflow's ``__init__`` does
    (the first activation, before any signal handler or ``run``)."""

    def __init__(self) -> None:
        #: How many of ``GENERATIONS`` the run was recorded with (0: before generation-43).
        self._level = 0

    def begin(self) -> None:
        """Read the run's generation (first activation only: see the module's docstring). A new
        run takes the newest and records its marker alone; a replay finds the one it recorded
        (asking for a newer one on replay records nothing and answers False)."""
        for level in range(len(GENERATIONS), 0, -1):
            if workflow.patched(GENERATIONS[level - 1]):
                self._level = level
                return
        self._level = 0

    def since(self, generation: str) -> bool:
        """Whether the run was recorded by ``generation`` of the code or a later one."""
        return self._level >= GENERATIONS.index(generation) + 1

    @property
    def current(self) -> bool:
        """Whether the run was recorded by generation-43 or later (issue 43's changes)."""
        return self.since(GENERATION_PATCH)

    def has(self, patch_id: str) -> bool:
        """Whether the run takes ``patch_id``, a change from before generation-43: always in a
        run of a generation (no marker), else asked where the run always asked it."""
        return self.current or workflow.patched(patch_id)
