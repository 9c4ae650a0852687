"""The agents bench/agent_overhead.py runs under pydantic-ai's Temporal durability: ours
(``DurableCodeMode``: each ``run_code`` a child execution, each tool call its activity) and
the peer (pydantic-ai-harness's ``CodeMode``: Monty in the agent's workflow code, each nested
tool call an activity), with the same scripted model and the same tool."""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from codemode.integrations.pydantic_ai import DurableCodeMode

#: The code both agents' model writes: N sequential tool calls.
CALLS = 50


def sequential_code(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i=i)\nt"


def one_run_code(messages, info) -> ModelResponse:  # type: ignore[no-untyped-def]
    """A model that writes the code once, then answers with what it returned."""
    returned = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(str(returned[-1].content)[:200])])
    return ModelResponse(parts=[ToolCallPart("run_code", {"code": sequential_code(CALLS)}, tool_call_id="bench-1")])


ours = Agent(
    FunctionModel(one_run_code),
    name="bench_ours",
    capabilities=[TemporalDurability(), DurableCodeMode("bench.bench_tools", index_search_attributes=False)],
)


def _peer() -> Agent:
    from pydantic_ai_harness import CodeMode

    agent = Agent(
        FunctionModel(one_run_code),
        name="bench_peer",
        capabilities=[TemporalDurability(), CodeMode(max_tool_calls=10_000)],
    )

    @agent.tool_plain
    async def noop(i: int) -> int:
        return i

    return agent


try:
    peer: Agent | None = _peer()
except ImportError:  # pydantic-ai-harness not installed: the bench says how to get it
    peer = None


@workflow.defn
class OursAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [ours]

    @workflow.run
    async def run(self, prompt: str) -> str:
        return (await ours.run(prompt)).output


@workflow.defn
class PeerAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [peer] if peer is not None else []

    @workflow.run
    async def run(self, prompt: str) -> str:
        assert peer is not None
        return (await peer.run(prompt)).output
