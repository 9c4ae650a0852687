"""Two small pieces of ``CodeExecutionWorkflow``'s state about its sandbox steps: what the
sandbox layer holds for the execution (released when it ends), and the journal tail of a
deferred checkpoint (issue 11)."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import CheckpointRef, ReleaseInput, StartInput, StepResult


@dataclass
class Held:
    """What the execution holds in the sandbox layer right now, released at the end."""

    checkpoint: CheckpointRef | None = None
    #: The checkpoint before, deleted by the next step (or by the release).
    superseded: CheckpointRef | None = None
    #: A live process kept on a worker: (its id, that worker's own task queue).
    session: tuple[str, str | None] | None = None
    #: The key of a run kept live instead of a checkpoint (deferred).
    live: str | None = None
    #: The step whose sandbox holds compute (a cloud session) has been suspended.
    suspended: bool = False
    holds_compute: bool = False

    def release_input(self, start: StartInput) -> ReleaseInput | None:
        """What freeing it takes (None: it holds nothing)."""
        if self.checkpoint is None and self.session is None and self.live is None:
            return None
        return ReleaseInput(
            execution_id=start.execution_id,
            runtime=start.runtime,
            first_run_id=start.first_run_id,
            checkpoint=self.checkpoint,
            superseded=self.superseded,
            session_id=self.session[0] if self.session else None,
            live=self.live,
            cell=start.cell is not None,
        )

    @classmethod
    def after(cls, step: StepResult, superseded: CheckpointRef | None) -> Held:
        """What the sandbox layer holds after ``step``."""
        calls = step.kind == "calls"
        return cls(
            # holds its own checkpoint; the one before is deleted next step. Finished: the
            # checkpoint it consumed is the last one left, unless it freed it.
            checkpoint=step.checkpoint if calls else None if step.released else superseded,
            superseded=superseded if calls else None,
            session=(step.session_id, step.session_queue) if step.session_id else None,
            live=step.live if calls else None,
            holds_compute=step.holds_compute,
        )


@dataclass
class DeferredTail:
    """Deferred checkpoints: where the journal entries since the last saved checkpoint start
    (``journal[base_index:]``), the stdout length then, and the JSON bytes of those entries.
    ``ok`` is off for the rest of a run once a step found the live run on another worker
    (eager dispatch off, several workers)."""

    base_index: int = 0
    stdout_at_base: int = 0
    tail_bytes: int = 0
    ok: bool = True
