"""An OpenAI Agents SDK agent as a workflow under ``OpenAIAgentsPlugin``, with ``run_code``;
and the SDK's test model scripted to call it once and then quote its result."""

from __future__ import annotations

import json
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from agents.items import ModelResponse
    from temporalio.openai_agents.testing import ResponseBuilders, TestModel

    from codemode.openai_agents import run_code_tool
    from tests.integrations.frameworks.common import CODE, TOOLS


def quoting_model(code: str = CODE) -> TestModel:
    """Calls ``run_code(code)`` first; once a tool output is in its input, answers ``done: <it>``."""

    class Quoting(TestModel):
        def __init__(self) -> None:
            super().__init__(lambda: ResponseBuilders.output_message("unused"))

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
            outputs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if outputs:
                return ResponseBuilders.output_message(f"done: {outputs[-1]['output']}")
            return ResponseBuilders.tool_call(json.dumps({"code": code}), "run_code")

    return Quoting()


def stepwise_model(*codes: str) -> TestModel:
    """Calls ``run_code`` with each of ``codes`` in turn (call ids ``call-1``, ``call-2``...),
    then answers ``done: <the last result>``."""

    class Stepwise(TestModel):
        def __init__(self) -> None:
            super().__init__(lambda: ResponseBuilders.output_message("unused"))

        async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
            outputs = [i for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
            if len(outputs) < len(codes):
                n = len(outputs)
                return ResponseBuilders.tool_call(json.dumps({"code": codes[n]}), "run_code", call_id=f"call-{n + 1}")
            return ResponseBuilders.output_message(f"done: {outputs[-1]['output']}")

    return Stepwise()


@workflow.defn
class OpenAISessionCoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        agent = Agent(name="coder", instructions="Use run_code.", tools=[run_code_tool(TOOLS, session=True)])
        result = await Runner.run(agent, prompt)
        return str(result.final_output)


@workflow.defn
class OpenAICoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        # No tools named: the tools of the worker's CodeModePlugin.
        tool = run_code_tool() if prompt.startswith("plugin's tools:") else run_code_tool(TOOLS)
        agent = Agent(name="coder", instructions="Use run_code.", tools=[tool])
        result = await Runner.run(agent, prompt)
        return str(result.final_output)
