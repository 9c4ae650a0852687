"""The user's own workflow: one activity of theirs, then LLM-written code as a child execution."""

from datetime import timedelta

from temporalio import workflow

from codemode import CodeExecutionRequest, execute_code

with workflow.unsafe.imports_passed_through():
    from activities import compose_greeting


@workflow.defn
class ReportWorkflow:
    @workflow.run
    async def run(self, city: str) -> str:
        greeting = await workflow.execute_activity(
            compose_greeting, city, start_to_close_timeout=timedelta(seconds=10)
        )
        code = f"w = get_weather({city!r})\nf\"{{w['city']}} is at {{w['temp_c']}}C\""
        outcome = await execute_code(CodeExecutionRequest(code=code), id=f"{workflow.info().workflow_id}-code-1")
        return f"{greeting} {outcome.output}" if outcome.success else f"failed: {outcome.error}"
