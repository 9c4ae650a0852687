"""Client helpers: connect with the pydantic data converter, start and inspect executions."""

from __future__ import annotations

import os
import re
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from activities.storage import BlobStore
from worker import telemetry
from worker.converter import data_converter, default_store
from worker.requests import InputTooLarge, check_request_size, search_attributes_registered  # noqa: F401
from workflows.models import (
    RUNTIME_KEY,
    STATUS_KEY,
    TASK_QUEUE,
    WORKFLOW_TYPE,
    CodeExecutionRequest,
    ExecutionOutcome,
)

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
    application's tracer provider, or ``tracer``). ``store`` defaults to the one the
    environment configures (``activities/storage.py``)."""
    kwargs.setdefault("interceptors", telemetry.interceptors(tracer))
    if "data_converter" not in kwargs:
        kwargs["data_converter"] = data_converter(store or await default_store())
    return await Client.connect(address or default_address(), namespace=namespace, **kwargs)


_MARKDOWN = re.compile(r"([\\`*_\[\]<>~|])")


def plain(text: str) -> str:
    """Text the web UI shows as written: it renders summaries and details as markdown."""
    return _MARKDOWN.sub(r"\\\1", text)


def unplain(text: str) -> str:
    """Back from ``plain``: the text as written, for a terminal."""
    return re.sub(r"\\(.)", r"\1", text)


def summary_text(req: CodeExecutionRequest) -> str:
    """What the code is about, in a line: its leading comment when it starts with one, else
    its first statement that is not an import."""
    lines = [ln.strip() for ln in req.code.strip().splitlines() if ln.strip()]
    comment = []
    for ln in lines:
        if not ln.startswith("#"):
            break
        comment.append(ln.lstrip("#").strip())
    first = " ".join(c for c in comment if c)
    if not first:
        body = [ln for ln in lines if not ln.startswith(("#", "import ", "from "))]
        first = body[0] if body else (lines[0] if lines else "(empty)")
    if len(first) > 80:
        first = first[:77] + "..."
    return f"{first} ({req.runtime}, {len(req.code.splitlines())} lines)"


def _summary(req: CodeExecutionRequest) -> str:
    return plain(summary_text(req))


def _details(req: CodeExecutionRequest) -> str:
    return f"```python\n{req.code}\n```"


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
        static_summary=_summary(request),
        static_details=_details(request),
        **options,
    )


async def run_execution(client: Client, request: CodeExecutionRequest, **kwargs: Any) -> ExecutionOutcome:
    handle = await start_execution(client, request, **kwargs)
    return await handle.result()
