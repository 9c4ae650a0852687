"""A LangGraph agent with ``run_code``: LangChain's fake chat model, scripted to call it once
and then quote its result; the graph as Temporal's plugin runs it (the model node an
activity, the tools node workflow code) and as a plain graph with a checkpointer."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import START, MessagesState, StateGraph

from codemode.langgraph import run_code_tool, tools_condition, tools_node
from tests.integrations.frameworks.common import CODE, TOOLS


class QuotingChatModel(FakeMessagesListChatModel):
    """The fake chat model's scripted tool call first; once a tool answered, ``done: <it>``."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        if messages and isinstance(messages[-1], ToolMessage):
            return ChatResult(generations=[ChatGeneration(message=AIMessage(f"done: {messages[-1].content}"))])
        return super()._generate(messages, *args, **kwargs)

    def bind_tools(self, tools: Any, **kwargs: Any) -> QuotingChatModel:
        return self  # the script decides, as Deep Agents' own FakeModel does


def scripted_model(code: str = CODE, call_id: str = "call-1") -> QuotingChatModel:
    call = {"name": "run_code", "args": {"code": code}, "id": call_id, "type": "tool_call"}
    return QuotingChatModel(responses=[AIMessage("", tool_calls=[call])])


async def call_model(state: MessagesState) -> dict[str, Any]:
    """The model node (module level: the plugin runs it as an activity by its name)."""
    return {"messages": [await scripted_model().ainvoke(state["messages"])]}


def coder_graph(**tool_options: Any) -> StateGraph:
    """model -> (tools -> model)* : the model node an activity, the tools node workflow code
    (metadata the plugin reads; a plain graph ignores it)."""
    builder = StateGraph(MessagesState)
    builder.add_node(
        "model", call_model, metadata={"execute_in": "activity", "start_to_close_timeout": timedelta(seconds=30)}
    )
    builder.add_node("tools", tools_node(run_code_tool(TOOLS, **tool_options)), metadata={"execute_in": "workflow"})
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    return builder
