"""A Deep Agents agent as a Temporal workflow (``temporalio.deepagents``) with durable code
mode's ``run_code`` tool: the LangGraph tool (``codemode.langgraph.run_code_tool``), passed to
``create_temporal_deep_agent`` as it is, so it runs in the workflow (the plugin warns that it is
unwrapped: that is what lets it wait for a person with nothing live). The code's email waits for
``codemode approve``.

With a server up (``codemode server``)::

    python -m examples.frameworks.deepagents

The model is scripted (a LangChain fake chat model behind ``DeepAgentsPlugin(model_provider=...)``):
it calls ``run_code`` once and then quotes its result, offline, with no key.
"""

from __future__ import annotations

import asyncio
import warnings

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from langchain_core.messages import HumanMessage

    from codemode.langgraph import run_code_tool
    from examples.frameworks._run import TOOLS
    from examples.frameworks.langgraph import ScriptedChatModel, model


@workflow.defn
class DeepAgentCoder:
    @workflow.run
    async def run(self, prompt: str) -> str:
        from temporalio.deepagents.workflow import create_temporal_deep_agent

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Tool 'run_code' is passed to create_deep_agent unwrapped")
            agent = create_temporal_deep_agent(model="scripted", tools=[run_code_tool(TOOLS)])
        out = await agent.ainvoke({"messages": [HumanMessage(prompt)]})
        return str(out["messages"][-1].content)


class _Scripted(ScriptedChatModel):
    def bind_tools(self, tools: object, **kwargs: object) -> _Scripted:
        return self  # the script decides which tool to call


async def main() -> None:
    from temporalio.deepagents import DeepAgentsPlugin

    from codemode import CodeModePlugin
    from examples.frameworks._run import run_agent

    deepagents = DeepAgentsPlugin(model_provider=lambda _name: _Scripted(responses=model.responses))
    await run_agent("deep-coder", DeepAgentCoder, [CodeModePlugin(TOOLS), deepagents])


if __name__ == "__main__":
    asyncio.run(main())
