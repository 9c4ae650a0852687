"""``codemode.langgraph.run_code_tool`` with LangChain's fake chat model: inside a workflow
under ``LangGraphPlugin`` (the async ``tools_node``) and under ``DeepAgentsPlugin`` (the same
tool passed to ``create_deep_agent``), each beside ``CodeModePlugin`` with every task replayed
and a Replayer pass; and outside a workflow, where ``interrupt()`` stops the graph and
``Command(resume=...)`` finishes it. A person decides with ``codemode approve``/``deny``; the
transfer runs once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from codemode.storage import BlobStore
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import ExecutionOutcome
from tests.integrations.frameworks.common import (
    TOOLS,
    agent_waits_for_the_person,
    decide,
    tool_output,
    transfers,
)


def langgraph_plugins(store: BlobStore) -> list:
    from temporalio.langgraph import LangGraphPlugin

    from tests.integrations.frameworks.langgraph_graphs import coder_graph

    return [CodeModePlugin(TOOLS, store=store, tracing=False), LangGraphPlugin(graphs={"coder": coder_graph()})]


def deepagents_plugins(store: BlobStore) -> list:
    from temporalio.deepagents import DeepAgentsPlugin

    from tests.integrations.frameworks.langgraph_graphs import scripted_model

    return [
        CodeModePlugin(TOOLS, store=store, tracing=False),
        DeepAgentsPlugin(model_provider=lambda _name: scripted_model()),
    ]


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
async def test_run_code_in_a_langgraph_workflow_waits_for_the_person_inside_the_tool(
    approve: bool, temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    from tests.integrations.frameworks.langgraph_workflows import LangGraphCoderWorkflow

    await agent_waits_for_the_person(
        LangGraphCoderWorkflow,
        langgraph_plugins(store),
        prefix="lg-coder",
        approve=approve,
        temporal_address=temporal_address,
        task_queue=task_queue,
        events_file=events_file,
    )


async def test_run_code_in_a_deep_agent_workflow_waits_for_the_person_inside_the_tool(
    temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    from tests.integrations.frameworks.langgraph_workflows import DeepAgentCoderWorkflow

    await agent_waits_for_the_person(
        DeepAgentCoderWorkflow,
        deepagents_plugins(store),
        prefix="da-coder",
        parent_checked=False,
        temporal_address=temporal_address,
        task_queue=task_queue,
        events_file=events_file,
    )


async def test_run_code_outside_a_workflow_interrupts_the_graph_and_resumes_it(
    client: Client, temporal_address: str, task_queue: str, events_file: Path
) -> None:
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from codemode.activities import ToolRegistry
    from codemode.worker.worker import CodeModeWorker
    from tests.integrations.frameworks.langgraph_graphs import coder_graph

    app = coder_graph(client=client, task_queue=task_queue).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex[:8]}"}}
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS), task_queue=task_queue).running():
        first = await app.ainvoke({"messages": [HumanMessage("pay ana")]}, config)
        (stop,) = first["__interrupt__"]  # the graph stopped for a person
        execution_id = stop.value["execution_id"]
        assert [p["tool"] for p in stop.value["pending_approvals"]] == ["transfer"]
        await decide(temporal_address, execution_id)
        second = await app.ainvoke(Command(resume=True), config)
    result = tool_output(second["messages"][-1].content)
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert result["execution_id"] == execution_id
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]
    assert transfers(events_file) == 1


async def test_run_code_outside_a_workflow_interrupts_a_deep_agent_and_resumes_it(
    client: Client, temporal_address: str, task_queue: str, events_file: Path
) -> None:
    """The same tool given to ``create_deep_agent`` (no Temporal plugin): it interrupts the
    agent's graph, and ``Command(resume=...)`` finishes it."""
    from deepagents import create_deep_agent
    from langchain_core.messages import HumanMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from codemode.activities import ToolRegistry
    from codemode.langgraph import run_code_tool
    from codemode.worker.worker import CodeModeWorker
    from tests.integrations.frameworks.langgraph_graphs import scripted_model

    tool = run_code_tool(TOOLS, client=client, task_queue=task_queue)
    agent = create_deep_agent(model=scripted_model(), tools=[tool], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"thread-{uuid.uuid4().hex[:8]}"}}
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS), task_queue=task_queue).running():
        first = await agent.ainvoke({"messages": [HumanMessage("pay ana")]}, config)
        (stop,) = first["__interrupt__"]
        execution_id = stop.value["execution_id"]
        await decide(temporal_address, execution_id)
        second = await agent.ainvoke(Command(resume=True), config)
    result = tool_output(second["messages"][-1].content)
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert transfers(events_file) == 1
