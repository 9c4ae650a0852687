"""Starting executions from a client: ``start_execution`` (a workflow, or a session's next cell)
and ``run_execution`` (start, then wait for the outcome)."""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from codemode.client.requests import InputTooLarge, check_request_size, search_attributes_registered, starter  # noqa: F401
from codemode.workflows.models import (
    RUNTIME_KEY,
    STATUS_KEY,
    TASK_QUEUE,
    WORKFLOW_TYPE,
    CodeExecutionRequest,
    ExecutionOutcome,
)
from codemode.workflows.summary import execution_details, execution_summary, plain, summary_text, unplain  # noqa: F401


async def start_execution(
    client: Client,
    request: CodeExecutionRequest,
    *,
    execution_id: str | None = None,
    task_queue: str = TASK_QUEUE,
    **options: Any,
) -> WorkflowHandle[Any, ExecutionOutcome]:
    """Start one CodeExecutionWorkflow; its workflow id is the execution id. ``options`` go to
    ``Client.start_workflow`` (e.g. ``id_reuse_policy``). Raises ``InputTooLarge``.

    A request with ``session=NAME`` is sent to that session as its next cell
    (``client/sessions.py``); the handle is the cell's execution once its turn came (its id
    is ``session:NAME:N``; ``execution_id`` and ``options`` do not apply)."""
    if request.started_by is None:  # who started it: the approvers file's four-eyes rules read it
        request = request.model_copy(update={"started_by": starter()})
    if request.session is not None:
        from codemode.client.sessions import submit_cell

        if execution_id is not None:
            raise ValueError("a session's cell has the id session:NAME:N; do not pass execution_id")
        cell = await submit_cell(client, request.session, request, task_queue=task_queue)
        return await cell.started()
    check_request_size(request)
    if request.index_search_attributes and not await search_attributes_registered(client):
        request = request.model_copy(update={"index_search_attributes": False})
    if request.index_search_attributes and "search_attributes" not in options:
        # Indexed from its first event: the workflow then skips its own upsert (one command,
        # one event and one visibility write fewer per execution).
        options["search_attributes"] = TypedSearchAttributes(
            [SearchAttributePair(STATUS_KEY, "running"), SearchAttributePair(RUNTIME_KEY, request.runtime)]
        )
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=execution_id or f"exec-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=ExecutionOutcome,
        static_summary=execution_summary(request),
        static_details=execution_details(request),
        **options,
    )


async def run_execution(client: Client, request: CodeExecutionRequest, **kwargs: Any) -> ExecutionOutcome:
    handle = await start_execution(client, request, **kwargs)
    return await handle.result()
