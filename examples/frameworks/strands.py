"""A Strands agent as a Temporal workflow (``temporalio.strands_agents``: a ``TemporalAgent``,
called with ``await agent.invoke_async(...)``) with durable code mode's ``run_code`` tool. The
code's email waits for a person inside the tool, holding nothing, until ``codemode approve``.

In an environment with the ``strands`` extra (not the ``mcp`` one: Strands pins ``mcp<2``), with
a server up (``codemode server``)::

    python -m examples.frameworks.strands

Strands ships no test model: this one is a ``Model`` whose ``stream`` yields the events a
provider would, scripted to call ``run_code`` once and then quote its result (offline, no key).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from datetime import timedelta
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from strands.models.model import Model

    from codemode.strands import run_code_tool
    from examples.frameworks._run import CODE, TOOLS


class ScriptedModel(Model):
    """Calls run_code(CODE); once its result is the last message, quotes it."""

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
        results = [b["toolResult"] for b in (messages[-1]["content"] if messages else []) if "toolResult" in b]
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
class StrandsCoder:
    @workflow.run
    async def run(self, prompt: str) -> str:
        from temporalio.strands_agents import TemporalAgent

        agent = TemporalAgent(
            model="scripted",
            start_to_close_timeout=timedelta(seconds=60),
            tools=[run_code_tool(TOOLS)],
            callback_handler=None,
        )
        return str(await agent.invoke_async(prompt)).strip()


async def main() -> None:
    from temporalio.strands_agents import StrandsPlugin

    from codemode import CodeModePlugin
    from examples.frameworks._run import run_agent

    await run_agent(
        "strands-coder", StrandsCoder, [CodeModePlugin(TOOLS), StrandsPlugin(models={"scripted": ScriptedModel})]
    )


if __name__ == "__main__":
    asyncio.run(main())
