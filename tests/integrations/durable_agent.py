"""Agents under pydantic-ai's Temporal durability with ``DurableCodeMode``: each agent is a
workflow of the application's own. ``coder``'s ``run_code`` runs each execution as a child
workflow (``session=False``); ``sessioncoder``'s calls are cells of a session that is its
workflow's child, so its second call uses what the first left."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability

    from codemode.integrations.pydantic_ai import DurableCodeMode
    from tests.integrations.agent_model import scripted, stepwise

TOOLS = "tests.workflows.tools_under_test"
CODE = "w = lookup('Paris')\nreceipt = transfer('ana', 12.5)\n{'city': w['city'], 'ref': receipt['ref']}"
#: Two calls of one session: the second uses what the first defined, and waits for a person.
FIRST = "city = lookup('Paris')['city']\ncity"
SECOND = "receipt = transfer('ana', 12.5)\n{'city': city, 'ref': receipt['ref']}"

agent = Agent(
    scripted(CODE),
    name="coder",
    capabilities=[TemporalDurability(), DurableCodeMode(TOOLS, session=False)],
)
session_agent = Agent(
    stepwise(FIRST, SECOND),
    name="sessioncoder",
    capabilities=[TemporalDurability(), DurableCodeMode(TOOLS)],
)


@workflow.defn
class CoderAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [agent]

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await agent.run(prompt)
        return result.output


@workflow.defn
class SessionCoderAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [session_agent]

    @workflow.run
    async def run(self, prompt: str) -> str:
        result = await session_agent.run(prompt)
        return result.output
