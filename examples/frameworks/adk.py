"""A Google ADK agent as a Temporal workflow (``temporalio.google_adk``) with durable code
mode's ``run_code`` tool. The code's email waits for a person inside the tool, holding
nothing, until ``codemode approve``; then the agent answers.

With a server up (``codemode server``)::

    python -m examples.frameworks.adk

ADK ships no test model: this one is a ``BaseLlm`` in ADK's model registry (``TemporalModel``
finds models there by name, in the model activity), scripted to call ``run_code`` once and then
quote its result. It runs offline, with no key.
"""

from __future__ import annotations

import asyncio
import importlib
import json
from collections.abc import AsyncGenerator
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from google.adk.agents import Agent
    from google.adk.models import BaseLlm, LLMRegistry, LlmRequest, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types
    from temporalio.google_adk import TemporalModel

    from codemode.adk import run_code_tool
    from examples.frameworks._run import CODE, TOOLS


class ScriptedLlm(BaseLlm):
    """Calls run_code(CODE); once its answer is in the request, quotes it."""

    @classmethod
    def supported_models(cls) -> list[str]:
        return ["scripted"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answers = [
            p.function_response.response for c in llm_request.contents for p in c.parts or [] if p.function_response
        ]
        if answers:
            part = types.Part(text=f"done: {json.dumps(answers[-1])}")
        else:
            part = types.Part(function_call=types.FunctionCall(name="run_code", args={"code": CODE}, id="call-1"))
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


LLMRegistry.register(ScriptedLlm)
# ADK imports these on an agent's first use; imported here, outside any workflow task, so that
# the first one does not spend the sandbox's 2 s deadlock allowance importing them.
for _module in ("google.adk.tools.agent_tool", "google.adk.flows.llm_flows", "google.adk.workflow"):
    importlib.import_module(_module)


@workflow.defn
class AdkCoder:
    @workflow.run
    async def run(self, prompt: str) -> str:
        model = TemporalModel("scripted", {"start_to_close_timeout": timedelta(seconds=60)})
        agent = Agent(name="coder", model=model, instruction="Answer with run_code.", tools=[run_code_tool(TOOLS)])
        runner = InMemoryRunner(agent=agent, app_name="coder")
        session = await runner.session_service.create_session(app_name="coder", user_id="ana")
        message = types.Content(role="user", parts=[types.Part(text=prompt)])
        texts = [
            p.text
            async for event in runner.run_async(user_id="ana", session_id=session.id, new_message=message)
            for p in (event.content.parts if event.content else None) or []
            if p.text
        ]
        return texts[-1] if texts else ""


async def main() -> None:
    from temporalio.google_adk import GoogleAdkPlugin

    from codemode import CodeModePlugin
    from examples.frameworks._run import run_agent

    await run_agent("adk-coder", AdkCoder, [CodeModePlugin(TOOLS), GoogleAdkPlugin()])


if __name__ == "__main__":
    asyncio.run(main())
