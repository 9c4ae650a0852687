"""An OpenAI Agents SDK agent with durable code mode, through the MCP front: the agent's MCP
server is ``codemode mcp`` over stdio (the SDK's ``MCPServerStdio``), and each piece of code it
writes runs with ``execute`` as a durable execution over ``examples.tools``.

With a server and a worker up (``codemode dev --tools examples.tools``), or with nothing (then
``codemode mcp`` starts the embedded server and a worker itself)::

    python -m examples.agent_openai_agents

The model is the SDK's own scripted test model (``agents.testing.ScriptedModel``), so it runs
offline, with no key, and answers the same way every time. Name a real one to use it instead:
``CODEMODE_AGENT_MODEL=gpt-5-mini`` (with ``OPENAI_API_KEY`` set).

Both questions run as cells of one session (``execute(code, session=...)``), so the email's
code uses the variables the trip's code left. The SDK's MCP client has no elicitation, so the
email's approval cannot be put to the person through it: ``execute`` answers
``awaiting_approval`` with the commands that decide the call, and the run waits, holding
nothing, for ``codemode approve`` (or the web UI); ``codemode result`` then gives its outcome.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

# Run as a file, Python puts examples/ first on the path, where email.py (an example) would
# shadow the standard library's email module: put the repository there instead.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no trace export: offline, no key

from agents import Agent, Runner
from agents.mcp import MCPServerStdio
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

TRIP = "Which of Paris, London and Tokyo is warmest tomorrow, and what is 1000 EUR in USD?"
EMAIL = "Email that to ana@example.com."
#: One session for the conversation: the second cell sees what the first left.
SESSION = f"openai-agents-{uuid.uuid4().hex[:8]}"

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

EMAIL_CODE = """\
body = best + " is warmest; 1000 EUR is " + str(round(1000 * rate)) + " USD."
receipt = send_email(to="ana@example.com", subject="Trip", body=body)
receipt["sent"]"""

#: The variables the codemode server needs from this process (the MCP SDK gives a stdio server
#: only a short safe list of the client's environment, and these are not on it).
PASSED_ENV = ("TEMPORAL_ADDRESS", "CODEMODE_TASK_QUEUE", "CODEMODE_ENCRYPTION_KEYS", "CODEMODE_DATA_DIR", "PYTHONPATH")


def codemode_server() -> MCPServerStdio:
    """``codemode mcp --tools examples.tools`` as the agent's MCP server, over stdio."""
    env = {name: os.environ[name] for name in PASSED_ENV if name in os.environ}
    return MCPServerStdio(
        name="codemode",
        params={
            "command": sys.executable,
            "args": ["-m", "codemode", "mcp", "--tools", "examples.tools"],
            "env": env,
            "cwd": os.getcwd(),
        },
        # An execute call lasts as long as the code (and the first one may start a server).
        client_session_timeout_seconds=300,
        # The tool result the model reads: execute's structuredContent, as JSON.
        use_structured_content=True,
    )


def returned(call: ModelCall) -> dict[str, Any]:
    """What the last ``execute`` call returned, as the model reads it."""
    outputs = [item for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"]
    output = outputs[-1]["output"]
    return json.loads(output if isinstance(output, str) else output[0]["text"])


def answer_trip(call: ModelCall) -> list[Any]:
    report = returned(call)
    if report["status"] != "completed":
        return [assistant_message(f"The code did not finish: {report['status']} {report.get('error')}")]
    out = report["output"]
    return [assistant_message(f"{out['warmest']} is warmest at {out['temp_c']}C; 1000 EUR is {out['usd']} USD.")]


def answer_email(call: ModelCall) -> list[Any]:
    report = returned(call)
    if report["status"] == "completed":
        return [assistant_message("Sent.")]
    if report["status"] != "awaiting_approval":
        return [assistant_message(f"The email was not sent: {report['status']} {report.get('error')}")]
    lines = [f"The email waits for a person ({report['execution_id']}):"]
    for pending in report["pending_approvals"]:
        lines += [f"  {pending['summary']}", f"  approve: {pending['approve']}", f"  deny:    {pending['deny']}"]
    return [assistant_message("\n".join(lines))]


def scripted_model() -> ScriptedModel:
    """Plays the model: calls ``execute`` for each question, then answers from what it returned."""
    return ScriptedModel(
        [
            [function_call("execute", {"code": TRIP_CODE, "session": SESSION}, call_id="call-trip")],
            ModelStep.respond(answer_trip),
            [function_call("execute", {"code": EMAIL_CODE, "session": SESSION}, call_id="call-email")],
            ModelStep.respond(answer_email),
        ]
    )


async def main() -> None:
    model: Any = os.environ.get("CODEMODE_AGENT_MODEL") or scripted_model()
    async with codemode_server() as server:
        agent = Agent(
            name="coder",
            instructions=f"Answer by writing Python for the `execute` tool, with session={SESSION!r}.",
            model=model,
            mcp_servers=[server],
        )
        history: list[Any] = []
        for question in (TRIP, EMAIL):
            print(f"> {question}")
            result = await Runner.run(agent, history + [{"role": "user", "content": question}])
            print(result.final_output, end="\n\n", flush=True)
            history = result.to_input_list()


if __name__ == "__main__":
    asyncio.run(main())
