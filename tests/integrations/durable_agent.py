"""An agent under pydantic-ai's Temporal durability with ``DurableCodeMode``: the agent is a
workflow of the application's own; its ``run_code`` runs each execution as a child workflow."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability

    from integrations.pydantic_ai import DurableCodeMode
    from tests.integrations.agent_model import scripted

CODE = "w = lookup('Paris')\nreceipt = transfer('ana', 12.5)\n{'city': w['city'], 'ref': receipt['ref']}"

agent = Agent(
    scripted(CODE),
    name="coder",
    capabilities=[TemporalDurability(), DurableCodeMode("tests.workflows.tools_under_test")],
)


@workflow.defn
class CoderAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await agent.run(prompt)
        return result.output
