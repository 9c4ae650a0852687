"""An agent in a process of its own, as an application runs one, for the deferred-approval
test: ``start`` runs it until its code waits for a person (then saves the conversation and the
deferred calls and exits), ``resume`` is a fresh process that picks the conversation up days
later with ``deferred_results``; its model then runs a second piece of code that uses what the
first left in the conversation's session.

    python tests/integrations/agent_proc.py start TASK_QUEUE STATE_FILE
    python tests/integrations/agent_proc.py resume TASK_QUEUE STATE_FILE

The Temporal address comes from TEMPORAL_ADDRESS."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydantic import TypeAdapter  # noqa: E402
from pydantic_ai import Agent, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import ModelMessagesTypeAdapter  # noqa: E402

from codemode.integrations.pydantic_ai import DurableCodeMode  # noqa: E402
from tests.integrations.agent_model import stepwise  # noqa: E402

CODE = "w = lookup('Paris')\nreceipt = transfer('ana', 12.5)\n{'city': w['city'], 'ref': receipt['ref']}"
#: After the resume: ``w`` is still there (the first cell set it before the approval).
AGAIN = "w['city'] + ' again'"
REQUESTS = TypeAdapter(DeferredToolRequests)


def make_agent(task_queue: str) -> tuple[Agent, DurableCodeMode]:
    capability = DurableCodeMode("tests.workflows.tools_under_test", task_queue=task_queue)
    agent = Agent(stepwise(CODE, AGAIN), capabilities=[capability], output_type=[str, DeferredToolRequests])
    return agent, capability


async def start(task_queue: str, state: Path) -> None:
    agent, _ = make_agent(task_queue)
    result = await agent.run("pay ana after checking the weather")
    assert isinstance(result.output, DeferredToolRequests), result.output
    state.write_text(
        json.dumps(
            {
                "messages": json.loads(ModelMessagesTypeAdapter.dump_json(result.all_messages())),
                "requests": REQUESTS.dump_python(result.output, mode="json"),
            }
        )
    )
    print(json.dumps(REQUESTS.dump_python(result.output, mode="json")["metadata"]), flush=True)


async def resume(task_queue: str, state: Path) -> None:
    agent, capability = make_agent(task_queue)
    saved = json.loads(state.read_text())
    messages = ModelMessagesTypeAdapter.validate_python(saved["messages"])
    results = await capability.deferred_results(REQUESTS.validate_python(saved["requests"]))
    result = await agent.run(message_history=messages, deferred_tool_results=results)
    print(result.output, flush=True)


if __name__ == "__main__":
    mode, queue, path = sys.argv[1:4]
    asyncio.run((start if mode == "start" else resume)(queue, Path(path)))
    sys.stdout.flush()
    os._exit(0)  # temporalio can crash at interpreter exit
