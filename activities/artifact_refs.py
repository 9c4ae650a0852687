"""What the history says about artifacts: a small reference per file, never its bytes.

A ``save_artifact`` call is answered by the step itself (``activities/artifacts.py``) and
journaled like a tool's result: the result is the artifact's reference (name, MIME type,
size, SHA-256). The workflow records it as a call of the audit and lists the references on
the outcome (``ExecutionOutcome.artifacts``). Kept apart from the store code so the workflow
imports only this.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from codemode.runtimes.artifacts import SAVE_ARTIFACT
from codemode.runtimes.journal_replay import JournalEntry

from .records import ErrorInfo, ToolCallRecord


class Artifact(BaseModel):
    """A file the code handed back. Its bytes are in the object store (sealed when encryption
    is on), under the execution's first run and the SHA-256 of the bytes."""

    name: str
    mime_type: str
    size: int
    sha256: str
    #: The execution's first run, under which the bytes are stored (set on the outcome).
    run_id: str = ""

    @property
    def is_image(self) -> bool:
        return self.mime_type.startswith("image/")


def served_record(entry: JournalEntry) -> ToolCallRecord:
    """The audit record of a ``save_artifact`` call the step answered."""
    record = ToolCallRecord(
        call_id=entry.call_id,
        tool=entry.function_name,
        args=entry.args,
        kwargs=entry.kwargs,
        status="ok" if entry.error_type is None else "error",
        attempts=0,
        summary=entry.describe(),
    )
    if entry.error_type is None:
        record.result = entry.value()
    else:
        record.error = ErrorInfo(type=entry.error_type, message=entry.error_message, kind="resource")
    return record


def artifacts_of(calls: Iterable[ToolCallRecord], run_id: str) -> list[Artifact]:
    """The artifacts an execution's calls saved, in order; a name saved again keeps its last
    content (at the place of the last save)."""
    found: dict[str, Artifact] = {}
    for call in calls:
        if call.tool != SAVE_ARTIFACT or call.status != "ok" or not isinstance(call.result, dict):
            continue
        try:
            artifact = Artifact.model_validate({**call.result, "run_id": run_id})
        except ValueError:
            continue
        found.pop(artifact.name, None)
        found[artifact.name] = artifact
    return list(found.values())
