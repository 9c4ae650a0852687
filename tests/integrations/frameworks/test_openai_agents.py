"""``codemode.openai_agents.run_code_tool`` with the SDK's test model: inside a workflow under
``OpenAIAgentsPlugin`` beside ``CodeModePlugin`` (every task replayed, then a Replayer pass),
and outside one with the SDK's ``needs_approval``/``RunState``. A person decides with
``codemode approve``/``deny``; the transfer runs once."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from codemode.storage import BlobStore
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import ExecutionOutcome
from tests.integrations.frameworks.common import (
    TOOLS,
    agent_waits_for_the_person,
    decide,
    tool_output,
    transfers,
    wait_parked,
)

pytestmark = pytest.mark.usefixtures("no_openai_tracing")


@pytest.fixture
def no_openai_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")


def plugins(store: BlobStore) -> list:
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.testing import TestModelProvider

    from tests.integrations.frameworks.openai_workflows import quoting_model

    return [
        CodeModePlugin(TOOLS, store=store, tracing=False),
        OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30)),
            model_provider=TestModelProvider(quoting_model()),
        ),
    ]


@pytest.mark.parametrize(
    "approve, prompt",
    [(True, "pay ana"), (False, "pay ana"), (True, "plugin's tools: pay ana")],
    ids=["approved", "denied", "approved-with-the-plugin's-tools"],
)
async def test_run_code_in_a_workflow_waits_for_the_person_inside_the_tool(
    approve: bool, prompt: str, temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    from tests.integrations.frameworks.openai_workflows import OpenAICoderWorkflow

    await agent_waits_for_the_person(
        OpenAICoderWorkflow,
        plugins(store),
        prefix="oa-coder",
        approve=approve,
        prompt=prompt,
        call_id="call",  # the test model's call id is "call"
        temporal_address=temporal_address,
        task_queue=task_queue,
        events_file=events_file,
    )


async def test_run_code_outside_a_workflow_stops_the_run_for_approval_and_resumes_it(
    client: Client, temporal_address: str, task_queue: str, events_file: Path
) -> None:
    from agents import Agent, Runner

    from codemode.activities import ToolRegistry
    from codemode.openai_agents import execution_id_of, run_code_tool
    from codemode.worker.worker import CodeModeWorker
    from tests.integrations.frameworks.openai_workflows import quoting_model

    tool = run_code_tool(TOOLS, client=client, task_queue=task_queue, id_prefix=f"oa-{uuid.uuid4().hex[:8]}")
    agent = Agent(name="coder", instructions="Use run_code.", tools=[tool], model=quoting_model())
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS), task_queue=task_queue).running():
        first = await Runner.run(agent, "pay ana")
        assert first.final_output is None and len(first.interruptions) == 1  # stopped for a person
        item = first.interruptions[0]
        execution_id = execution_id_of(tool, item.raw_item.call_id)
        assert await wait_parked(client, execution_id) == ["transfer"]
        await decide(temporal_address, execution_id)

        state = first.to_state()
        state.approve(item)  # lets the tool return the execution's outcome
        second = await Runner.run(agent, state)
    result = tool_output(second.final_output)
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert result["execution_id"] == execution_id
    outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]
    assert transfers(events_file) == 1


@pytest.mark.slow
async def test_the_agent_survives_a_sigkill_while_its_code_waits_for_approval(
    temporal_address: str, store: BlobStore, events_file: Path
) -> None:
    """The worker that runs the agent (and its child execution) is SIGKILLed while the child waits
    for a person; the person approves with no worker running; a new worker finishes the agent.
    The transfer ran once; the lookup before it was not repeated."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys

    from tests.cli.runner import REPO
    from tests.integrations.frameworks.openai_workflows import OpenAICoderWorkflow

    def spawn() -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("openai_worker_proc.py")), temporal_address, task_queue],
            env={**os.environ, "CODEMODE_TEST_EVENTS": str(events_file), "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        return proc

    client = await Client.connect(temporal_address, plugins=[CodeModePlugin(store=store, tracing=False)])
    task_queue = f"oa-agents-{uuid.uuid4().hex[:6]}"
    agent_id = f"oa-coder-{uuid.uuid4().hex[:8]}"
    child_id = f"{agent_id}-run_code-call"
    first, second = spawn(), None
    try:
        handle = await client.start_workflow(OpenAICoderWorkflow.run, "pay ana", id=agent_id, task_queue=task_queue)
        assert await wait_parked(client, child_id) == ["transfer"]
        first.send_signal(signal.SIGKILL)
        first.wait()
        await decide(temporal_address, child_id)  # recorded as a signal: no worker runs
        second = spawn()
        answer = await asyncio.wait_for(handle.result(), 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
    result = tool_output(answer)
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert transfers(events_file) == 1
    outcome = await client.get_workflow_handle(child_id, result_type=ExecutionOutcome).result()
    assert [(c.tool, c.attempts) for c in outcome.tool_calls] == [("lookup", 1), ("transfer", 1)]


async def test_run_code_with_a_session_keeps_the_namespace_between_calls(
    temporal_address: str, store: BlobStore, task_queue: str, events_file: Path
) -> None:
    """``session=True``: the agent's calls are cells of one session, the agent workflow's child;
    the second uses what the first defined and waits for the person."""
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.testing import TestModelProvider

    from tests.integrations.frameworks.openai_workflows import OpenAISessionCoderWorkflow, stepwise_model

    first_code = "city = lookup('Paris')['city']\ncity"
    second_code = "r = transfer('ana', 12.5)\n{'city': city, 'paid': r['amount']}"
    used = [
        CodeModePlugin(TOOLS, store=store, tracing=False),
        OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30)),
            model_provider=TestModelProvider(stepwise_model(first_code, second_code)),
        ),
    ]
    client = await Client.connect(temporal_address, plugins=used)
    agent_id = f"oa-session-{uuid.uuid4().hex[:8]}"
    cell_id = f"session:{agent_id}-run_code:2"
    async with Worker(client, task_queue=task_queue, workflows=[OpenAISessionCoderWorkflow], max_cached_workflows=0):
        handle = await client.start_workflow(
            OpenAISessionCoderWorkflow.run, "pay ana", id=agent_id, task_queue=task_queue
        )
        assert await wait_parked(client, cell_id) == ["transfer"]
        await decide(temporal_address, cell_id)
        answer = await handle.result()
    result = tool_output(answer)
    assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
    assert (result["session"], result["cell"]) == (f"{agent_id}-run_code", 2)
    assert transfers(events_file) == 1
    await Replayer(workflows=[OpenAISessionCoderWorkflow], plugins=used).replay_workflow(await handle.fetch_history())
