"""A workflow of the application's own that runs cells in a session of its own
(``workflows/child_session.py``): the session is its child, cells go by signal, answers come
back by signal."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.workflows.child_session import run_session_cell
    from codemode.workflows.models import CodeExecutionRequest


class Step(BaseModel):
    code: str
    request_id: str
    restart: bool = False
    #: Wait this long before sending it (lets a short idle timeout close the session).
    pause_seconds: float = 0


class ParentInput(BaseModel):
    session: str
    steps: list[Step]
    idle_seconds: float = 3600


class StepResult(BaseModel):
    session: str
    index: int
    execution_id: str
    success: bool
    output: object = None
    error: str | None = None
    replaced: str | None = None


@workflow.defn
class SessionParentWorkflow:
    @workflow.run
    async def run(self, job: ParentInput) -> list[StepResult]:
        results = []
        for step in job.steps:
            if step.pause_seconds:
                await workflow.sleep(step.pause_seconds)
            cell = await run_session_cell(
                job.session,
                CodeExecutionRequest(code=step.code, restart=step.restart),
                request_id=step.request_id,
                idle_timeout=timedelta(seconds=job.idle_seconds),
            )
            results.append(
                StepResult(
                    session=cell.session,
                    index=cell.index,
                    execution_id=cell.execution_id,
                    success=cell.outcome.success,
                    output=cell.outcome.output,
                    error=cell.outcome.error.type if cell.outcome.error else None,
                    replaced=cell.replaced,
                )
            )
        return results
