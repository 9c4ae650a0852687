"""Client helpers: connect with the pydantic data converter, start and inspect executions."""

from __future__ import annotations

import os
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.storage import BlobStore
from worker.converter import default_store
from worker.plugin import CodeModePlugin
from worker.requests import InputTooLarge, check_request_size, search_attributes_registered  # noqa: F401
from workflows.models import (
    RUNTIME_KEY,
    STATUS_KEY,
    TASK_QUEUE,
    WORKFLOW_TYPE,
    CodeExecutionRequest,
    ExecutionOutcome,
)
from workflows.summary import execution_details, execution_summary, plain, summary_text, unplain  # noqa: F401

DEFAULT_ADDRESS = "localhost:7233"


def default_address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS


async def connect(
    address: str | None = None,
    *,
    namespace: str = "default",
    tracer: Any | None = None,
    store: BlobStore | None = None,
    **kwargs: Any,
) -> Client:
    """A client with our data converter (pydantic JSON, large payloads in the object store;
    every client and worker must use it) and OpenTelemetry tracing (spans go to the
    application's tracer provider, or ``tracer``), both made by ``CodeModePlugin``. ``store``
    defaults to the one the environment configures (``activities/storage.py``). The plugin
    itself is not installed on the client: workers built on it add their own (with their
    tools), as ``CodeModeWorker`` does."""
    if "data_converter" not in kwargs or "interceptors" not in kwargs:
        plugin = CodeModePlugin(store=store or await default_store(), tracing=tracer)
        kwargs.setdefault("interceptors", plugin.interceptors)
        kwargs.setdefault("data_converter", plugin.make_data_converter())
    return await Client.connect(address or default_address(), namespace=namespace, **kwargs)


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
    (``worker/sessions.py``); the handle is the cell's execution once its turn came (its id
    is ``session:NAME:N``; ``execution_id`` and ``options`` do not apply)."""
    if request.session is not None:
        from worker.sessions import submit_cell

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
