"""A Google ADK agent with ``run_code``: a scripted model (ADK ships none; a ``BaseLlm`` in its
model registry, as ``TemporalModel`` finds models by name) that calls it once and then quotes
its result; the agent as a workflow under ``GoogleAdkPlugin``, and outside one."""

from __future__ import annotations

import contextlib
import importlib
import json
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from google.adk.agents import Agent
    from google.adk.models import BaseLlm, LLMRegistry, LlmRequest, LlmResponse
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    from codemode.adk import run_code_tool
    from tests.integrations.frameworks.common import CODE, TOOLS

MODEL = "scripted-coder"
#: What ADK's runner imports on its first run (outside the sandbox, as the plugin passes
#: google.adk through): imported here, before a worker starts, so that a busy machine's first
#: workflow task does not spend the deadlock detector's 2 s importing them.
for _name in (
    "tools.agent_tool",
    "flows.llm_flows",
    "workflow",
    "code_executors",
    "memory",
    "artifacts",
    "auth",
    "telemetry",
    "a2a",
):
    with contextlib.suppress(ImportError):
        importlib.import_module(f"google.adk.{_name}")


class ScriptedLlm(BaseLlm):
    """Calls ``run_code(CODE)`` (id ``call-1``); once its answer is in the request, ``done: <it>``."""

    @classmethod
    def supported_models(cls) -> list[str]:
        return [MODEL]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        answers = [
            p.function_response.response
            for c in llm_request.contents
            for p in c.parts or []
            if p.function_response is not None and p.function_response.name == "run_code"
        ]
        done = [a for a in answers if a and "waiting_for_approval" not in a]
        if done:
            part = types.Part(text=f"done: {json.dumps(done[-1])}")
        else:
            call = types.FunctionCall(name="run_code", args={"code": CODE}, id="call-1")
            part = types.Part(function_call=call)
        yield LlmResponse(content=types.Content(role="model", parts=[part]))


LLMRegistry.register(ScriptedLlm)


def coder(model: Any = MODEL, **tool_options: Any) -> Agent:
    return Agent(name="coder", model=model, instruction="Use run_code.", tools=[run_code_tool(TOOLS, **tool_options)])


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def final_text(events: list[Any]) -> str:
    texts = [p.text for e in events if e.content for p in e.content.parts or [] if p.text]
    return texts[-1] if texts else ""


@workflow.defn
class AdkCoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        from temporalio.google_adk import TemporalModel

        runner = InMemoryRunner(
            agent=coder(TemporalModel(MODEL, {"start_to_close_timeout": timedelta(seconds=30)})), app_name="coder"
        )
        session = await runner.session_service.create_session(app_name="coder", user_id="ana")
        events = [
            e async for e in runner.run_async(user_id="ana", session_id=session.id, new_message=user_says(prompt))
        ]
        return final_text(events)
