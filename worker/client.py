"""Client helpers: connect with the pydantic data converter, start and inspect executions."""

from __future__ import annotations

import os
import uuid
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter

from worker import telemetry
from workflows.models import SA_RUNTIME, SA_STATUS, TASK_QUEUE, WORKFLOW_TYPE, CodeExecutionRequest, ExecutionOutcome

DEFAULT_ADDRESS = "localhost:7233"


def default_address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS


async def connect(
    address: str | None = None, *, namespace: str = "default", tracer: Any | None = None, **kwargs: Any
) -> Client:
    """A client with the pydantic data converter (required by every client and worker) and
    OpenTelemetry tracing (spans go to the application's tracer provider, or ``tracer``)."""
    kwargs.setdefault("interceptors", telemetry.interceptors(tracer))
    return await Client.connect(
        address or default_address(), namespace=namespace, data_converter=pydantic_data_converter, **kwargs
    )


_indexed: dict[int, bool] = {}


async def search_attributes_registered(client: Client) -> bool:
    """Whether CodeModeStatus/CodeModeRuntime exist on the client's namespace (cached)."""
    key = id(client)
    if key not in _indexed:
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

        try:
            resp = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
            names = set(resp.custom_attributes)
            _indexed[key] = SA_STATUS in names and SA_RUNTIME in names
        except Exception:
            _indexed[key] = False
    return _indexed[key]


def _summary(req: CodeExecutionRequest) -> str:
    lines = [ln.strip() for ln in req.code.strip().splitlines() if ln.strip() and not ln.strip().startswith("#")]
    first = lines[0] if lines else "(empty)"
    if len(first) > 60:
        first = first[:57] + "..."
    return f"{req.runtime}: {first} ({len(req.code.splitlines())} lines)"


async def start_execution(
    client: Client,
    request: CodeExecutionRequest,
    *,
    execution_id: str | None = None,
    task_queue: str = TASK_QUEUE,
    **options: Any,
) -> WorkflowHandle[Any, ExecutionOutcome]:
    """Start one CodeExecutionWorkflow; its workflow id is the execution id. ``options`` go to
    ``Client.start_workflow`` (e.g. ``id_reuse_policy``)."""
    if request.index_search_attributes and not await search_attributes_registered(client):
        request = request.model_copy(update={"index_search_attributes": False})
    return await client.start_workflow(
        WORKFLOW_TYPE,
        request,
        id=execution_id or f"exec-{uuid.uuid4().hex[:12]}",
        task_queue=task_queue,
        result_type=ExecutionOutcome,
        static_summary=_summary(request),
        static_details=f"```python\n{request.code}\n```",
        **options,
    )


async def run_execution(client: Client, request: CodeExecutionRequest, **kwargs: Any) -> ExecutionOutcome:
    handle = await start_execution(client, request, **kwargs)
    return await handle.result()
