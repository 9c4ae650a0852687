"""A LangGraph agent as a Temporal workflow (``temporalio.langgraph``) with durable code mode's
``run_code`` tool: the model node runs as an activity, ``codemode.langgraph.tools_node`` runs the
tool in the workflow (LangGraph's prebuilt ``ToolNode`` never finishes under the plugin), and the
async ``tools_condition`` routes. The code's email waits for ``codemode approve``.

With a server up (``codemode server``)::

    python -m examples.frameworks.langgraph

The model is LangChain's fake chat model, scripted to call ``run_code`` once and then quote its
result: it runs offline, with no key.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langgraph.graph import START, MessagesState, StateGraph
    from temporalio.langgraph import graph

    from codemode.langgraph import run_code_tool, tools_condition, tools_node
    from examples.frameworks._run import CODE, TOOLS


class ScriptedChatModel(FakeMessagesListChatModel):
    """The fake model's scripted call of run_code; once the tool answered, it quotes it."""

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> ChatResult:
        if isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(f"done: {messages[-1].content}"))])
        return super()._generate(messages, *args, **kwargs)


model = ScriptedChatModel(
    responses=[AIMessage("", tool_calls=[{"name": "run_code", "args": {"code": CODE}, "id": "call-1"}])]
)


async def call_model(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


def coder_graph() -> StateGraph:
    builder = StateGraph(MessagesState)
    builder.add_node(
        "model", call_model, metadata={"execute_in": "activity", "start_to_close_timeout": timedelta(seconds=60)}
    )
    builder.add_node("tools", tools_node(run_code_tool(TOOLS)), metadata={"execute_in": "workflow"})
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder


@workflow.defn
class LangGraphCoder:
    @workflow.run
    async def run(self, prompt: str) -> str:
        out = await graph("coder").compile().ainvoke({"messages": [HumanMessage(prompt)]})
        return str(out["messages"][-1].content)


async def main() -> None:
    from temporalio.langgraph import LangGraphPlugin

    from codemode import CodeModePlugin
    from examples.frameworks._run import run_agent

    plugins = [CodeModePlugin(TOOLS), LangGraphPlugin(graphs={"coder": coder_graph()})]
    await run_agent("langgraph-coder", LangGraphCoder, plugins)


if __name__ == "__main__":
    # The plugin runs the model node as an activity by its module's name: not __main__.
    from examples.frameworks.langgraph import main as named_main

    asyncio.run(named_main())
