"""A workflow of the application's own that runs code as a child execution: what every agent
framework's ``run_code`` tool does, without the framework (``test_plugin_composition.py``)."""

from __future__ import annotations

from temporalio import workflow

from codemode.workflows.child_execution import execute_code
from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome


@workflow.defn
class RunsCodeWorkflow:
    @workflow.run
    async def run(self, code: str) -> ExecutionOutcome:
        request = CodeExecutionRequest(code=code)
        return await execute_code(request, id=f"{workflow.info().workflow_id}-code")
