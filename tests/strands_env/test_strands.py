"""``codemode.strands.run_code_tool`` with a scripted Strands model: inside a workflow under
``StrandsPlugin`` beside ``CodeModePlugin`` in both orders (every task replayed, then a
Replayer pass), and outside one with Strands' interrupts. A person decides with ``codemode
approve``/``deny``; the transfer runs once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

pytest.importorskip("strands", reason="Strands runs in its own environment (.venv-strands, .ci/run)")

from temporalio.client import Client

from codemode.storage import BlobStore
from codemode.worker.converter import store_of
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import ExecutionOutcome
from tests.integrations.frameworks.common import (
    TOOLS,
    agent_waits_for_the_person,
    decide,
    tool_output,
    transfers,
)


def plugins(store: BlobStore, *, ours_first: bool = True) -> list:
    from temporalio.strands_agents import StrandsPlugin

    from tests.strands_env.strands_agents import ScriptedModel

    ours = CodeModePlugin(TOOLS, store=store, tracing=False)
    theirs = StrandsPlugin(models={"scripted": ScriptedModel})
    return [ours, theirs] if ours_first else [theirs, ours]


@pytest.mark.parametrize(
    "approve, ours_first",
    [(True, True), (True, False), (False, True)],
    ids=["approved-codemode-first", "approved-codemode-last", "denied"],
)
async def test_run_code_in_a_strands_workflow_waits_for_the_person_inside_the_tool(
    approve: bool, ours_first: bool, temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    from temporalio.strands_agents._failure_converter import StrandsFailureConverter

    from tests.strands_env.strands_agents import StrandsCoderWorkflow

    used = plugins(store, ours_first=ours_first)
    client = await Client.connect(temporal_address, plugins=used)
    assert store_of(client.data_converter) is store  # our store around Strands' converter
    assert client.data_converter.failure_converter_class is StrandsFailureConverter
    await agent_waits_for_the_person(
        StrandsCoderWorkflow,
        used,
        prefix="strands-coder",
        approve=approve,
        temporal_address=temporal_address,
        task_queue=task_queue,
        events_file=events_file,
    )


async def test_run_code_outside_a_workflow_interrupts_the_agent_and_resumes_it(
    client: Client, temporal_address: str, task_queue: str, events_file: Path
) -> None:
    from strands import Agent

    from codemode.activities import ToolRegistry
    from codemode.strands import INTERRUPT_NAME, run_code_tool
    from codemode.worker.worker import CodeModeWorker
    from tests.strands_env.strands_agents import ScriptedModel

    tool = run_code_tool(TOOLS, client=client, task_queue=task_queue, id_prefix=f"strands-{uuid.uuid4().hex[:8]}")
    agent = Agent(model=ScriptedModel(), tools=[tool], callback_handler=None)
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS), task_queue=task_queue).running():
        first = await agent.invoke_async("pay ana")
        assert first.stop_reason == "interrupt"  # the agent stopped for a person
        (stop,) = first.interrupts
        assert stop.name == INTERRUPT_NAME
        execution_id = stop.reason["execution_id"]
        assert [p["tool"] for p in stop.reason["pending_approvals"]] == ["transfer"]
        await decide(temporal_address, execution_id)
        second = await agent.invoke_async([{"interruptResponse": {"interruptId": stop.id, "response": "decided"}}])
    result = tool_output(str(second).strip())
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert result["execution_id"] == execution_id
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]
    assert transfers(events_file) == 1


async def test_the_strands_example_runs(temporal_address: str, tmp_path: Path) -> None:
    from tests.integrations.frameworks.test_examples import run_example

    await run_example("strands", temporal_address, tmp_path)
