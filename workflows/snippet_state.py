"""What a code execution keeps of the saved snippets its first step loaded (issue 48): their
versions, which its outcome lists, and the reference of their prelude, which every later step
gets (a journal replay rebuilds the run with exactly these versions; a sandbox restored without
them loads them back by hash). The workflow never reads the store: the step stored the prelude
and its result gave the reference. Runs of ``generation-48`` on (``workflows/versions.py``).
Workflow code: deterministic."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import CheckpointRef, StartInput, StepResult
    from codemode.activities.records import SnippetUse
    from codemode.workflows.continuation import Continuation
    from codemode.workflows.versions import Versions

#: The generation whose runs carry their snippets' prelude from step to step.
SNIPPETS_GENERATION = "generation-48"


class SnippetState:
    def __init__(self, versions: Versions, carry: Continuation | None = None) -> None:
        self.on = versions.since(SNIPPETS_GENERATION)
        self.uses: list[SnippetUse] = list(carry.snippets) if carry is not None else []
        self.prelude: CheckpointRef | None = carry.prelude if carry is not None else None

    def begin(self, start: StartInput) -> None:
        """A later run of a long execution: its replays use the prelude the first step stored."""
        start.prelude = self.prelude

    def first_step(self, step: StepResult, start: StartInput) -> None:
        """The first step loaded these snippets: keep their versions and their prelude's reference."""
        if not self.on:
            return
        self.uses, self.prelude = list(step.snippets), step.prelude
        start.prelude = step.prelude
