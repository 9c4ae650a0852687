"""Code executions started from your own workflow, as child workflows.

An agent's workflow (or any workflow of yours) that runs LLM-written code starts one
``CodeExecutionWorkflow`` per execution and waits for its outcome with nothing live: the
child parks on approvals, retries its tools and keeps its own audit, and the UI links it to
its parent. Cancelling the parent cancels the child. The worker needs ``CodeModePlugin``.

    from codemode.workflows.child_execution import execute_code

    outcome = await execute_code(CodeExecutionRequest(code=code), id=f"{workflow.info().workflow_id}-code-1")

Give each execution an id derived from something the parent's history fixes (its own id and
a step number, an LLM tool call id): a replayed parent then finds the same child instead of
starting a second one.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from codemode.workflows.models import RUNTIME_KEY, STATUS_KEY, WORKFLOW_TYPE, CodeExecutionRequest, ExecutionOutcome
from codemode.workflows.summary import execution_details, execution_summary


async def execute_code(
    request: CodeExecutionRequest,
    *,
    id: str,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> ExecutionOutcome:
    """Run ``request`` as a child ``CodeExecutionWorkflow`` and return its outcome (code errors
    come back in-band, ``success=False``). ``task_queue`` defaults to the parent's."""
    handle = await start_code(request, id=id, task_queue=task_queue, execution_timeout=execution_timeout)
    return await handle


async def start_code(
    request: CodeExecutionRequest,
    *,
    id: str,
    task_queue: str | None = None,
    execution_timeout: timedelta | None = None,
) -> workflow.ChildWorkflowHandle[object, ExecutionOutcome]:
    """Start the child and return its handle (await it for the outcome, ``cancel()`` it)."""
    search_attributes = None
    if request.index_search_attributes:
        # Indexed from its first event, as ``codemode.client.executions.start_execution`` does: the server
        # must have CodeModeStatus/CodeModeRuntime (``codemode server`` and the deploy
        # bootstrap register them; else pass ``index_search_attributes=False``).
        search_attributes = TypedSearchAttributes(
            [SearchAttributePair(STATUS_KEY, "running"), SearchAttributePair(RUNTIME_KEY, request.runtime)]
        )
    return await workflow.start_child_workflow(
        WORKFLOW_TYPE,
        request,
        id=id,
        task_queue=task_queue,
        result_type=ExecutionOutcome,
        execution_timeout=execution_timeout,
        search_attributes=search_attributes,
        static_summary=execution_summary(request),
        static_details=execution_details(request),
    )
