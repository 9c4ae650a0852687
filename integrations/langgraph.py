"""``run_code`` for LangGraph and LangChain agents (and Deep Agents, which takes the same tool):
``codemode.langgraph.run_code_tool(...)``, an async LangChain tool, and ``tools_node(...)`` /
``tools_condition``, an async tools node and router for graphs under Temporal's plugin.

* **Inside a workflow** (``temporalio.langgraph.LangGraphPlugin``, or Deep Agents'
  ``DeepAgentsPlugin``): the tool starts the execution as the agent workflow's child, its id
  from the workflow's id and the tool call's id (``InjectedToolCallId``), and waits for it there;
  a call that needs a person's approval waits inside the tool with nothing live. In a
  ``StateGraph`` run the tool with ``tools_node`` (``metadata={"execute_in": "workflow"}``) and
  route with the async ``tools_condition``: LangGraph's prebuilt ``ToolNode`` never finishes
  under the plugin, and a sync router runs in a thread, which a workflow cannot.
* **Outside a workflow**: LangGraph's ``interrupt()``. The tool starts the execution
  (idempotently, keyed by the graph's ``thread_id`` and the call id) and waits until it
  finishes or parks; when it parks, the graph stops with the pending calls in ``__interrupt__``
  while a person decides (``codemode approve``). ``graph.ainvoke(Command(resume=True), config)``
  runs the node again: the tool finds the same execution and returns its outcome; nothing in
  the code runs twice. The graph needs a checkpointer, as ``interrupt()`` does.

Needs the ``langgraph`` extra: ``pip install 'durable-codemode[langgraph]'``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from temporalio import workflow

from codemode.integrations.run_code import RunCode, as_text, pending_summary
from codemode.integrations.snippet_tools import SnippetTool, python_parameters
from codemode.workflows.models import ExecutionStatus

if TYPE_CHECKING:
    from codemode.activities.tools import ToolRegistry

__all__ = ["run_code_tool", "snippet_tool", "tools_condition", "tools_node"]


def run_code_tool(tools: str | ToolRegistry | None = None, **options: Any) -> StructuredTool:
    """A ``run_code(code)`` tool whose every run is a durable execution (options: those of
    ``codemode.integrations.run_code.RunCode``: ``runtime``, ``session``, ``limits``,
    ``client``, ``task_queue``, ``id_prefix``...)."""
    run = RunCode(tools, **options)

    async def run_code(code: str, tool_call_id: Annotated[str, InjectedToolCallId], config: RunnableConfig) -> str:
        if workflow.in_workflow():
            return as_text(await run.in_workflow(code, tool_call_id))
        from langgraph.types import interrupt

        thread = (config.get("configurable") or {}).get("thread_id")
        execution_id, got = await run.until_parked(code, tool_call_id, scope=thread)
        if isinstance(got, ExecutionStatus):
            interrupt(pending_summary(execution_id, got))  # the graph stops; resumed, it returns
        return as_text(await run.outcome(code, tool_call_id, scope=thread))

    return StructuredTool.from_function(
        coroutine=run_code,
        name=run.name,
        description=run.description(),
        metadata={"codemode": run},
    )


def snippet_tool(tool: SnippetTool, **options: Any) -> StructuredTool:
    """A saved snippet as a tool of its own (``codemode.integrations.snippet_tools``): its
    parameters, its docstring; a call runs the snippet's call as one durable execution (inside
    a workflow, the agent workflow's child; outside, keyed by the graph's thread and the call)."""
    from pydantic import Field, create_model

    run = RunCode(None, **options)
    props = tool.parameters.get("properties") or {}
    fields: dict[str, Any] = {
        p.name: (
            p.annotation,
            Field(
                default=... if p.default is p.empty else p.default,
                description=(props.get(p.name) or {}).get("description"),
            ),
        )
        for p in python_parameters(tool)
    }
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], ...)
    schema = create_model(tool.name, **fields)

    async def run_snippet(tool_call_id: str, config: RunnableConfig, **arguments: Any) -> str:
        if workflow.in_workflow():
            return as_text(await run.snippet_in_workflow(tool, arguments, tool_call_id))
        thread = (config.get("configurable") or {}).get("thread_id")
        return as_text(await run.snippet_outcome(tool, arguments, tool_call_id, scope=thread))

    return StructuredTool.from_function(
        coroutine=run_snippet, name=tool.name, description=tool.description, args_schema=schema
    )


def tools_node(
    *tools: BaseTool, messages_key: str = "messages"
) -> Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]:
    """An async node that runs the tool calls of the last AI message (in the order the model
    made them) and adds their ``ToolMessage``s: LangGraph's ``ToolNode`` for a graph under
    Temporal's plugin (add it with ``metadata={"execute_in": "workflow"}``)."""
    by_name = {t.name: t for t in tools}

    async def run_tools(state: dict[str, Any]) -> dict[str, Any]:
        last = _last_ai_message(state, messages_key)
        results: list[ToolMessage] = []
        for call in last.tool_calls if last is not None else []:
            tool = by_name.get(call["name"])
            if tool is None:
                results.append(
                    ToolMessage(
                        content=f"Error: no tool named {call['name']!r}; the tools are {sorted(by_name)}",
                        tool_call_id=call["id"] or "",
                        name=call["name"],
                        status="error",
                    )
                )
                continue
            results.append(await tool.ainvoke({**call, "type": "tool_call"}))
        return {messages_key: results}

    return run_tools


async def tools_condition(state: dict[str, Any], messages_key: str = "messages") -> str:
    """Route to ``"tools"`` when the last AI message calls tools, else to the end (LangGraph's
    ``tools_condition``, async: a sync router runs in a thread, which a workflow cannot)."""
    from langgraph.graph import END

    last = _last_ai_message(state, messages_key)
    return "tools" if last is not None and last.tool_calls else END


def _last_ai_message(state: dict[str, Any] | Sequence[Any], key: str) -> AIMessage | None:
    messages = state.get(key, []) if isinstance(state, dict) else getattr(state, key, state)
    last = messages[-1] if messages else None
    return last if isinstance(last, AIMessage) else None
