"""An agent workflow of the application's own whose ``run_code`` runs its code as a child
execution (what every framework adapter does), for the four-eyes test: the person it acts
for comes from its memo, or from ``started_by``."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.integrations.run_code import RunCode, RunCodeReturn
    from tests.workflows.conftest import TOOLS_MODULE


@workflow.defn
class AgentWorkflow:
    @workflow.run
    async def run(self, code: str, queue: str, acts_for: str | None = None) -> RunCodeReturn:
        run = RunCode(TOOLS_MODULE, task_queue=queue, started_by=acts_for)  # None: the memo's
        return await run.in_workflow(code, "call-1")
