"""An OpenAI Agents SDK agent as a Temporal workflow (``temporalio.openai_agents``) with durable
code mode's ``run_code`` tool. Its code sends an email, which waits for a person inside the
tool, holding nothing, until ``codemode approve``; then the agent answers.

With a server up (``codemode server``)::

    python -m examples.frameworks.openai_agents

The model is the SDK's test model (``temporalio.openai_agents.testing.TestModel``), scripted to
call ``run_code`` once and then quote its result: it runs offline, with no key.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner

    from codemode.openai_agents import run_code_tool
    from examples.frameworks._run import CODE, TOOLS


@workflow.defn
class OpenAICoder:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(name="coder", instructions="Answer by writing code for run_code.", tools=[run_code_tool(TOOLS)])
        result = await Runner.run(agent, prompt)
        return str(result.final_output)


def scripted_model() -> Any:
    from temporalio.openai_agents.testing import ResponseBuilders, TestModel

    class Scripted(TestModel):
        """Calls run_code(CODE); once its result is in the input, quotes it."""

        def __init__(self) -> None:
            super().__init__(lambda: ResponseBuilders.output_message(""))

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
            done = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if done:
                return ResponseBuilders.output_message(f"done: {done[-1]['output']}")
            return ResponseBuilders.tool_call(json.dumps({"code": CODE}), "run_code", call_id="call-1")

    return Scripted()


async def main() -> None:
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.testing import TestModelProvider

    from codemode import CodeModePlugin
    from examples.frameworks._run import run_agent

    openai_agents = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=TestModelProvider(scripted_model()),
    )
    await run_agent("openai-coder", OpenAICoder, [CodeModePlugin(TOOLS), openai_agents])


if __name__ == "__main__":
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")  # no trace export: offline, no key
    asyncio.run(main())
