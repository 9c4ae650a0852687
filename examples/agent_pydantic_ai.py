"""A pydantic-ai agent with durable code mode: its one tool, ``run_code``, runs each piece of
code it writes as a durable execution over ``examples.tools``.

With a server and a worker up (``codemode dev --tools examples.tools``)::

    python -m examples.agent_pydantic_ai                          # plan a trip, then email it
    codemode approve <execution id> --all --by ana              # a person decides
    python -m examples.agent_pydantic_ai --resume agent-conversation.json

The model is scripted (pydantic-ai's ``FunctionModel``), so it runs offline and answers the same
way every time. Name a real one to use it instead: ``CODEMODE_AGENT_MODEL=openai:gpt-5-mini``
(with that provider's key in the environment).

Both questions are one conversation, so both calls of ``run_code`` are cells of one durable
session: the email's code uses the variables the trip's code left. The email needs a person's
approval: the agent run ends with a deferred call and holds nothing while it waits. In a terminal the example asks you; elsewhere it saves the conversation and
tells you how to approve and resume, from any process, whenever.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

# Run as a file, Python puts examples/ first on the path, where email.py (an example) would
# shadow the standard library's email module: put the repository there instead.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from pydantic import TypeAdapter  # noqa: E402
from pydantic_ai import Agent, DeferredToolRequests  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402

from codemode.pydantic_ai import DurableCodeMode  # noqa: E402

TRIP = "Which of Paris, London and Tokyo is warmest tomorrow, and what is 1000 EUR in USD?"
EMAIL = "Email that to ana@example.com."
SAVED = Path("agent-conversation.json")
REQUESTS = TypeAdapter(DeferredToolRequests)

TRIP_CODE = """\
import asyncio
cities = ["Paris", "London", "Tokyo"]
forecasts = await asyncio.gather(*[get_forecast(c, days=2) for c in cities])
best, best_temp = "", -100
for city, days in zip(cities, forecasts):
    if days[1]["temp_c"] > best_temp:
        best, best_temp = city, days[1]["temp_c"]
rate = flaky_exchange_rate("EUR", "USD")
{"warmest": best, "temp_c": best_temp, "usd": round(1000 * rate)}"""

# The second call uses what the first left in the conversation's session (best, rate).
EMAIL_CODE = """\
body = best + " is warmest; 1000 EUR is " + str(round(1000 * rate)) + " USD."
receipt = send_email(to="ana@example.com", subject="Trip", body=body)
receipt["sent"]"""


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Plays the model: reads the newest question and the tool's returns as a model would."""
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returned:
        value: Any = returned[-1].content
        if isinstance(value, dict) and value.get("success"):
            output = value["output"]
            if isinstance(output, dict):
                text = f"{output['warmest']} is warmest at {output['temp_c']}C; 1000 EUR is {output['usd']} USD."
            else:
                text = "Sent." if output else "Not sent."
            return ModelResponse(parts=[TextPart(text)])
        return ModelResponse(
            parts=[TextPart(f"That did not work: {value.get('error') if isinstance(value, dict) else value}")]
        )
    prompts = [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
    ]
    code = EMAIL_CODE if prompts and "mail" in str(prompts[-1]) else TRIP_CODE
    calls = sum(1 for m in messages if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, ToolCallPart))
    return ModelResponse(parts=[ToolCallPart("run_code", {"code": code}, tool_call_id=f"call-{calls + 1}")])


def make_agent() -> tuple[Agent[None, str | DeferredToolRequests], DurableCodeMode]:
    code_mode = DurableCodeMode("examples.tools")
    model: Any = os.environ.get("CODEMODE_AGENT_MODEL") or FunctionModel(scripted_model)
    agent = Agent(model, capabilities=[code_mode], output_type=[str, DeferredToolRequests])
    return agent, code_mode


async def ask(agent: Agent[None, str | DeferredToolRequests], code_mode: DurableCodeMode) -> int:
    trip = await agent.run(TRIP)
    print(f"> {TRIP}\n{trip.output}\n")
    email = await agent.run(EMAIL, message_history=trip.all_messages())
    print(f"> {EMAIL}")
    if not isinstance(email.output, DeferredToolRequests):
        print(email.output)
        await code_mode.close_session(email.conversation_id)
        return 0
    for call_id, meta in email.output.metadata.items():
        for pending in meta["pending_approvals"]:
            print(f"⏸ {meta['execution_id']} waits for a person: {pending['summary']} (call {pending['call_id']})")
    SAVED.write_text(
        json.dumps(
            {
                "messages": json.loads(ModelMessagesTypeAdapter.dump_json(email.all_messages())),
                "requests": REQUESTS.dump_python(email.output, mode="json"),
            }
        )
    )
    if not sys.stdin.isatty():
        execution_id = next(iter(email.output.metadata.values()))["execution_id"]
        print(f"  approve: codemode approve {execution_id} --all --by NAME")
        print(f"  then:    python -m examples.agent_pydantic_ai --resume {SAVED}")
        return 0
    for meta in email.output.metadata.values():
        for pending in meta["pending_approvals"]:
            yes = input(f"Approve {pending['summary']}? [y/N] ").strip().lower() == "y"
            await code_mode.decide(meta["execution_id"], pending["call_id"], approve=yes, by=getpass.getuser())
    return await resume(agent, code_mode, SAVED)


async def resume(agent: Agent[None, str | DeferredToolRequests], code_mode: DurableCodeMode, saved: Path) -> int:
    state = json.loads(saved.read_text())
    messages = ModelMessagesTypeAdapter.validate_python(state["messages"])
    results = await code_mode.deferred_results(REQUESTS.validate_python(state["requests"]))
    final = await agent.run(message_history=messages, deferred_tool_results=results)
    print(final.output)
    await code_mode.close_session(final.conversation_id)  # done: its state goes now, not in a day
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resume", type=Path, help="continue a conversation saved while it waited for approval")
    args = parser.parse_args()
    agent, code_mode = make_agent()
    code = asyncio.run(resume(agent, code_mode, args.resume) if args.resume else ask(agent, code_mode))
    sys.stdout.flush()
    os._exit(code)  # temporalio can crash at interpreter exit


if __name__ == "__main__":
    main()
