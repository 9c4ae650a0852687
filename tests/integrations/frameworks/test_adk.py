"""``codemode.adk.run_code_tool`` with a scripted ADK model: inside a workflow under
``GoogleAdkPlugin`` beside ``CodeModePlugin`` (every task replayed, then a Replayer pass), and
outside one with ADK's tool confirmation. A person decides with ``codemode approve``/``deny``;
the transfer runs once."""

from __future__ import annotations

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


def plugins(store: BlobStore) -> list:
    from temporalio.google_adk import GoogleAdkPlugin

    return [CodeModePlugin(TOOLS, store=store, tracing=False), GoogleAdkPlugin()]


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
async def test_run_code_in_an_adk_workflow_waits_for_the_person_inside_the_tool(
    approve: bool, temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    from tests.integrations.frameworks.adk_agents import AdkCoderWorkflow

    await agent_waits_for_the_person(
        AdkCoderWorkflow,
        plugins(store),
        prefix="adk-coder",
        approve=approve,
        temporal_address=temporal_address,
        task_queue=task_queue,
        events_file=events_file,
    )


async def test_run_code_outside_a_workflow_asks_for_confirmation_and_resumes(
    client: Client, temporal_address: str, task_queue: str, events_file: Path
) -> None:
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from temporalio.google_adk import hitl_confirmation_response, pending_hitl_requests

    from codemode.activities import ToolRegistry
    from codemode.worker.worker import CodeModeWorker
    from tests.integrations.frameworks.adk_agents import coder, final_text, user_says

    runner = InMemoryRunner(agent=coder(client=client, task_queue=task_queue), app_name="coder")
    session = await runner.session_service.create_session(app_name="coder", user_id="ana")
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS), task_queue=task_queue).running():
        first = [
            e async for e in runner.run_async(user_id="ana", session_id=session.id, new_message=user_says("pay ana"))
        ]
        (request,) = [r for e in first for r in pending_hitl_requests(e)]  # the run paused for a person
        execution_id = request.payload["execution_id"]
        assert [p["tool"] for p in request.payload["pending_approvals"]] == ["transfer"]
        await decide(temporal_address, execution_id)
        answer = types.Content(role="user", parts=[hitl_confirmation_response(request.interrupt_id, confirmed=True)])
        second = [e async for e in runner.run_async(user_id="ana", session_id=session.id, new_message=answer)]
    result = tool_output(final_text(second))
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert result["execution_id"] == execution_id
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]
    assert transfers(events_file) == 1
