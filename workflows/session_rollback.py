"""Rolling a session back to before a cell (issue 47; workflow code of ``CodeSessionWorkflow``).

Asked by the session's ``rollback`` Update while no cell runs or waits: every cell from ``before``
on is rolled back, newest cell first, each by a rollback of its own (a child execution
``rollback:session:NAME:N`` that reads the cell's log from its history and compensates it, as
``codemode rollback`` does for any ended run; abandoned, not cancelled, if the session closes).
Then the namespace goes back too: the session forgets the state after the last cell and the
recipe of the cells rolled back, so its next cell rebuilds the namespace by replaying the cells
before ``before`` (their recorded tool results, under the session's seed and clock).

The namespace can go back only to where the session's recipe reaches: not past the cell that last
restarted it, nor into recipe segments already moved to the store. Such a rollback is refused
before anything runs. Deterministic.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

with workflow.unsafe.imports_passed_through():
    from codemode.activities.models import CellRecipe, SegmentRef
    from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome, RollbackOf, RollbackRequest
    from codemode.workflows.session_models import CellUndo, SessionRollback, SessionRolledBack, cell_execution_id
    from codemode.workflows.undo_run import rollback_id


def refusal(
    ask: SessionRollback,
    *,
    closed: str | None,
    recorded_before: bool,
    cells: int,
    busy: bool,
    recipe: list[CellRecipe],
    segments: list[SegmentRef],
    restart_cell: int,
) -> str | None:
    """Why the session cannot roll back to before ``ask.before`` (None: it can). ``closed``: the
    name of a session that closed; ``recorded_before``: it started before generation-47."""
    if closed is not None:
        return f"session {closed!r} is closed"
    if recorded_before:
        return "this session started before sessions could roll back"
    if busy:
        return "a cell runs or waits: roll back when the session is idle (or close the running cell first)"
    if not 1 <= ask.before <= cells:
        return f"there is no cell {ask.before} (cells 1 to {cells})"
    if not ask.by.strip():
        return "say who asks: by must not be empty"
    if ask.before <= restart_cell:
        return f"cell {restart_cell} restarted the session: its namespace cannot go back before it"
    if any(r.index is None for r in recipe):
        return "the session's recipe was recorded before it could roll back: restart it instead"
    inline_from = min((r.index for r in recipe if r.index is not None), default=cells + 1)
    if segments and ask.before < inline_from:
        return f"the recipe of the cells before {inline_from} is stored away: roll back to cell {inline_from} or later"
    return None


async def roll_back_cells(name: str, ask: SessionRollback, cells: int) -> list[CellUndo]:
    """Roll back cells ``cells`` down to ``ask.before``, one after the other, newest first."""
    out: list[CellUndo] = []
    info = workflow.info()
    order = RollbackRequest(by=ask.by, reason=ask.reason, door=ask.door, order=ask.order)
    for index in range(cells, ask.before - 1, -1):
        execution_id = cell_execution_id(name, index)
        rid = rollback_id(execution_id)
        part = CellUndo(index=index, execution_id=execution_id, rollback_id=rid)
        request = CodeExecutionRequest(
            code="",
            rollback_of=RollbackOf(execution_id=execution_id, request=order),
            started_by=ask.by,
            index_search_attributes=ask.index_search_attributes,
        )
        try:
            outcome: ExecutionOutcome = await workflow.execute_child_workflow(
                "CodeExecutionWorkflow",
                request,
                id=rid,
                result_type=ExecutionOutcome,
                task_queue=info.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
                static_summary=f"roll back cell {index} of session {name}",
            )
            part.undo = outcome.undo
            if outcome.error is not None:
                part.error = outcome.error.message
        except (ChildWorkflowError, WorkflowAlreadyStartedError) as err:
            part.error = str(getattr(err, "cause", None) or err)
        out.append(part)
    return out


def rolled_back(ask: SessionRollback, cells: list[CellUndo], recipe: list[CellRecipe]) -> SessionRolledBack:
    """The Update's answer once the cells are rolled back (``recipe``: the cells kept)."""
    kept = ", ".join(str(r.index) for r in recipe)
    return SessionRolledBack(
        before=ask.before,
        cells=cells,
        namespace=f"its next cell rebuilds it from cells {kept}" if kept else "its next cell starts it afresh",
    )
