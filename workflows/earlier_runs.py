"""What the earlier runs of a long execution stored (``_roll_over`` saves a segment of journal
and call records per run), read back when the execution ends: every call record for its
outcome, and a session cell's whole journal for its session. Workflow code: deterministic."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import CellEnd, LoadStateInput, SaveStateInput, SegmentRef, StartInput, StateSegment
    from codemode.runtimes.journal_replay import JournalEntry
    from codemode.workflows.models import ToolCallRecord
    from codemode.workflows.step_activities import load_state, save_state


async def all_calls(
    start: StartInput, segments: list[SegmentRef], current: list[ToolCallRecord]
) -> list[ToolCallRecord]:
    """Every call record of the execution, the earlier runs' read back from the store."""
    if not segments:
        return current
    earlier = await load_state(
        LoadStateInput(execution_id=start.execution_id, first_run_id=start.first_run_id, segments=segments),
        summary="read back the call records of the earlier runs",
    )
    return [*earlier.calls, *current]


async def store_cell_journal(
    start: StartInput, segments: list[SegmentRef], journal: list[JournalEntry], cell_end: CellEnd
) -> None:
    """A cell whose effects stay in its session: store its tool results under the session, for a
    rebuild of the session by replay (``CellRecipe``)."""
    assert start.cell is not None
    journal = list(journal)
    if segments:
        earlier = await load_state(
            LoadStateInput(execution_id=start.execution_id, first_run_id=start.first_run_id, segments=segments),
            summary="read back the journal of the earlier runs",
        )
        journal = [*earlier.journal, *journal]
    if not journal:
        return
    cell_end.journal = await save_state(
        SaveStateInput(
            execution_id=start.cell.scope.session_id,
            first_run_id=start.cell.scope.first_run_id,
            segment=StateSegment(journal=journal),
        ),
        summary="store the cell's tool results for the session",
    )
