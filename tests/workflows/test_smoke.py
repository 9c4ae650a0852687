from __future__ import annotations

import uuid

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest


async def test_trip_example_runs(client) -> None:
    import examples.tools

    tq = f"tq-{uuid.uuid4().hex[:6]}"
    worker = CodeModeWorker(client, ToolRegistry.from_module(examples.tools), task_queue=tq)
    async with worker.running():
        code = open("examples/trip.py").read()
        outcome = await run_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
    print(outcome.model_dump_json(indent=1))
    assert outcome.success, outcome.error
    assert outcome.output == {"best": "Tokyo", "temp_c": 24, "usd_per_eur": 1.08}
