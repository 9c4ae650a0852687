"""A workflow of a user's own, as an agent developer writes it: it runs LLM-written code as a
child execution on whatever worker carries ``CodeModePlugin`` (no codemode CLI involved)."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.workflows.child_execution import execute_code
    from codemode.workflows.models import CodeExecutionRequest


@workflow.defn
class UserAgentWorkflow:
    @workflow.run
    async def run(self, code: str) -> dict:
        wid = workflow.info().workflow_id
        outcome = await execute_code(CodeExecutionRequest(code=code), id=f"{wid}-code-1")
        return {"success": outcome.success, "output": outcome.output, "calls": [c.tool for c in outcome.tool_calls]}
