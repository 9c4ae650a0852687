"""pydantic-ai-harness's ``CodeMode`` under pydantic-ai's Temporal durability, and ours
(``DurableCodeMode``) in the same agent, for the peers benchmark.

A ``FunctionModel`` plays the model: its first answer calls ``run_code`` with the code the
workflow was given (the prompt), its second returns what the code returned. Under
``TemporalDurability`` each model answer is an activity (on both agents alike); with
``CodeMode`` the code runs in Monty inside the agent's workflow and each nested tool call is an
activity; with ``DurableCodeMode`` each ``run_code`` is a child execution of our engine
(``session=False``: one execution per call, as ``CodeMode`` starts a fresh REPL per run).
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.temporal import PydanticAIWorkflow, TemporalDurability
    from pydantic_ai.messages import (
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import FunctionModel

    from bench.peers import tool_hooks
    from codemode.integrations.pydantic_ai import DurableCodeMode


def code_once(messages, info) -> ModelResponse:  # type: ignore[no-untyped-def]
    """Call ``run_code`` with the prompt as the code, then answer with what it returned (or
    with the error it reported: a benchmark's model does not retry)."""
    parts = [p for m in messages for p in getattr(m, "parts", [])]
    retries = [p for p in parts if isinstance(p, RetryPromptPart)]
    if retries:
        return ModelResponse(parts=[TextPart("ERROR: " + retries[-1].model_response()[-2000:])])
    returned = [p for p in parts if isinstance(p, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(str(returned[-1].content)[-2000:])])
    prompt = next(p.content for p in parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[ToolCallPart("run_code", {"code": prompt}, tool_call_id="bench-1")])


def _peer() -> Agent | None:
    try:
        from pydantic_ai_harness import CodeMode
    except ImportError:
        return None
    agent = Agent(
        FunctionModel(code_once),
        name="peers_pah",
        capabilities=[
            TemporalDurability(),
            # Limits raised as for ours in the long run and the breaks (its defaults: 256 MiB,
            # 30 s, 1,000 host interactions per session), so what breaks is the design.
            CodeMode(
                max_tool_calls=10**9,
                resource_limits={"max_memory": 8 * 1024**3, "max_suspensions": 10**9, "max_duration_secs": 3600},
            ),
        ],
    )

    @agent.tool_plain
    async def noop(i: int) -> int:
        """Returns its argument after the tools' delay."""
        await tool_hooks.called()
        return i

    @agent.tool_plain
    async def echo(text: str) -> str:
        """Returns its argument: a call that carries a payload both ways."""
        await tool_hooks.called()
        return text

    @agent.tool_plain(requires_approval=True)
    async def send_report(to: str, body: str) -> str:
        """Sends nothing: a call that needs a person's approval."""
        await tool_hooks.called()
        return f"sent {len(body)} characters to {to}"

    return agent


peer = _peer()

ours = Agent(
    FunctionModel(code_once),
    name="peers_ours",
    capabilities=[
        TemporalDurability(),
        DurableCodeMode("bench.peers.tools", index_search_attributes=False, session=False),
    ],
)


@workflow.defn(name="BenchPydanticAIHarness")
class PeerAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [peer] if peer is not None else []

    @workflow.run
    async def run(self, code: str) -> str:
        assert peer is not None
        return (await peer.run(code)).output


@workflow.defn(name="BenchDurableCodeModeAgent")
class OursAgentWorkflow(PydanticAIWorkflow):
    __pydantic_ai_agents__ = [ours]

    @workflow.run
    async def run(self, code: str) -> str:
        return (await ours.run(code)).output
