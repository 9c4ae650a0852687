"""A Strands agent with ``run_code``: a scripted model (Strands ships none; a ``Model`` whose
``stream`` yields the events a provider would) that calls it once and then quotes its result;
the agent as a workflow under ``StrandsPlugin``, and outside one."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from strands.models.model import Model

    from codemode.strands import run_code_tool
    from tests.integrations.frameworks.common import CODE, TOOLS


class ScriptedModel(Model):
    """Calls ``run_code(CODE)`` (tool use id ``call-1``); once its result is the last message,
    answers ``done: <it>``."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        raise NotImplementedError
        yield

    async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
        last = messages[-1]["content"] if messages else []
        results = [block["toolResult"] for block in last if "toolResult" in block]
        yield {"messageStart": {"role": "assistant"}}
        if results:
            text = "".join(c.get("text", "") for c in results[-1]["content"])
            yield {"contentBlockDelta": {"delta": {"text": f"done: {text}"}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn"}}
            return
        yield {"contentBlockStart": {"start": {"toolUse": {"toolUseId": "call-1", "name": "run_code"}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps({"code": CODE})}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}


@workflow.defn
class StrandsCoderWorkflow:
    @workflow.run
    async def run(self, prompt: str) -> str:
        from temporalio.strands_agents import TemporalAgent

        agent = TemporalAgent(
            model="scripted",
            start_to_close_timeout=timedelta(seconds=30),
            tools=[run_code_tool(TOOLS)],
            callback_handler=None,
        )
        result = await agent.invoke_async(prompt)
        return str(result).strip()
