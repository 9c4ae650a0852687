"""OpenTelemetry: one trace covers starting an execution, the workflow, its steps and tools."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution
from codemode.worker.connection import connect
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import TOOLS_MODULE


async def test_execution_is_traced(temporal_address, task_queue) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = await connect(temporal_address, tracer=provider.get_tracer("codemode-test"))
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue)
    async with worker.running():
        outcome = await run_execution(client, CodeExecutionRequest(code="lookup('Oslo')"), task_queue=task_queue)
    assert outcome.success
    spans = exporter.get_finished_spans()
    names = {s.name for s in spans}
    assert "StartWorkflow:CodeExecutionWorkflow" in names
    assert "RunActivity:lookup" in names
    assert any(n.startswith("StartActivity:lookup") for n in names)
    assert len({s.context.trace_id for s in spans}) == 1  # one trace, across client and worker
