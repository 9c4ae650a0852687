"""A LangGraph agent as a workflow under ``LangGraphPlugin`` (graph ``coder``), and a Deep
Agents agent under ``DeepAgentsPlugin``, each with ``codemode.langgraph.run_code_tool``."""

from __future__ import annotations

import contextlib

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from langchain_core.messages import HumanMessage
    from temporalio.langgraph import graph

    from codemode.langgraph import run_code_tool
    from tests.integrations.frameworks.common import TOOLS

with workflow.unsafe.imports_passed_through(), contextlib.suppress(ImportError):
    # Deep Agents reads its distribution's metadata on its first agent (cached after): read
    # here, outside a workflow task, not within the sandbox's 2 s deadlock allowance.
    from deepagents._version import _lc_version

    _lc_version()


@workflow.defn
class LangGraphCoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        app = graph("coder").compile()
        out = await app.ainvoke({"messages": [HumanMessage(prompt)]})
        return str(out["messages"][-1].content)


@workflow.defn
class DeepAgentCoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        from temporalio.deepagents.workflow import create_temporal_deep_agent

        agent = create_temporal_deep_agent(model="scripted:coder", tools=[run_code_tool(TOOLS)])
        out = await agent.ainvoke({"messages": [HumanMessage(prompt)]})
        return str(out["messages"][-1].content)
