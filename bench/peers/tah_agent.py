"""temporal-agent-harness's code mode under the peers benchmark: one workflow per code
execution, as an agent of the harness runs one model tool call.

Runs only in the peer's own environment (``bench/.venv-peers``: the harness pins
pydantic-monty 1.0). The workflow is a harness agent (``AgentWorkflowRunner``, a
``code_mode_tool`` over the same tools as ours, the harness's approval policy) that admits
one ``run_code`` message carrying the script when it starts (what the agent's turn loop does
when a model asks for the tool), closes itself once the script ends, and returns the
script's output. Everything on the code's path is the harness's own: Monty stepped inside
the workflow, each host call an activity tool that publishes its lifecycle to the
workflow's stream, the approval gate in the workflow.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.workflow import ActivityConfig

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel
    from temporal_agent_harness.harness import agent
    from temporal_agent_harness.harness.agent_protocol import (
        AgentConfig,
        AgentMessage,
        TextReply,
        ToolApprovalPolicy,
    )
    from temporal_agent_harness.harness.agent_workflow import AgentWorkflowRunner
    from temporalio.contrib.workflow_streams import WorkflowStream

    from bench.peers import tool_hooks

_CONFIG = ActivityConfig(start_to_close_timeout=timedelta(seconds=60))


@agent.activity_tool_defn(name="noop", inherently_safe=True, activity_config=_CONFIG)
async def noop(i: int) -> int:
    """Returns its argument after the tools' delay."""
    await tool_hooks.called()
    return i


@agent.activity_tool_defn(name="echo", inherently_safe=True, activity_config=_CONFIG)
async def echo(text: str) -> str:
    """Returns its argument: a call that carries a payload both ways."""
    await tool_hooks.called()
    return text


@agent.activity_tool_defn(name="send_report", inherently_safe=False, activity_config=_CONFIG)
async def send_report(to: str, body: str) -> str:
    """Sends nothing: a call the harness's policy gates for a person."""
    await tool_hooks.called()
    return f"sent {len(body)} characters to {to}"


TOOLS = [noop, echo, send_report]


class Script(BaseModel):
    """A script for the harness's code mode."""

    script: str


@workflow.defn(name="BenchHarnessCodeMode")
class HarnessCodeMode:
    @workflow.init
    def __init__(self, config: AgentConfig, data: Script) -> None:
        self._runner = AgentWorkflowRunner(
            config,
            stream=WorkflowStream(),
            approval_policy_default=ToolApprovalPolicy.allow_inherently_safe(),
        )
        self._code = agent.code_mode_tool(TOOLS, name="code")
        self._output = ""

    @agent.accepts
    async def run_code(self, msg: Script) -> TextReply:
        """Run a script through the harness's code mode tool."""
        try:
            self._output = await self._runner.run_tool("code-1", self._code, script=msg.script)
        finally:
            self._runner._handle_close()  # one script per run: the turn loop ends after it
        return TextReply(text=self._output)

    @workflow.run
    async def run(self, config: AgentConfig, data: Script) -> str:
        # Admit the script as the agent's first message (what send_agent_message does).
        await self._runner._handle_send_agent_message(AgentMessage(type="run_code", payload={"script": data.script}))
        await self._runner.run(self)
        await asyncio.sleep(0)
        return self._output
