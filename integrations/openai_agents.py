"""``run_code`` for the OpenAI Agents SDK: ``codemode.openai_agents.run_code_tool(...)``, an
async ``FunctionTool``.

* **Inside a workflow** (``temporalio.openai_agents.OpenAIAgentsPlugin`` runs the agent loop as
  workflow code): the tool starts the execution as the agent workflow's child, its id from the
  workflow's id and ``ctx.tool_call_id``, and waits for it there; a call that needs a person's
  approval waits inside the tool with nothing live, for days if it must.
* **Outside a workflow**: the SDK's own human-in-the-loop. The tool's ``needs_approval`` starts
  the execution (idempotently, keyed by the call id) and waits until it finishes or parks; when
  it parks, the run stops with a ``ToolApprovalItem`` in ``result.interruptions`` while a person
  decides the code's call (``codemode approve``). Then ``state = result.to_state()``,
  ``state.approve(item)`` (it only lets the tool run: the decision on the code's call was the
  person's) and ``Runner.run(agent, state)``: the tool finds the same execution and returns its
  outcome; nothing in the code runs twice.

Needs the ``openai-agents`` extra: ``pip install 'durable-codemode[openai-agents]'``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agents import FunctionTool, RunContextWrapper
from agents.tool_context import ToolContext
from temporalio import workflow

from codemode.integrations.run_code import RunCode, as_text
from codemode.integrations.snippet_tools import SnippetTool
from codemode.workflows.models import ExecutionStatus

if TYPE_CHECKING:
    from codemode.activities.tools import ToolRegistry

__all__ = ["execution_id_of", "run_code_tool", "snippet_tool"]

CODE_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string", "description": "The Python code to run."}},
    "required": ["code"],
    "additionalProperties": False,
}


def run_code_tool(tools: str | ToolRegistry | None = None, **options: Any) -> FunctionTool:
    """A ``run_code(code)`` tool whose every run is a durable execution (options: those of
    ``codemode.integrations.run_code.RunCode``: ``runtime``, ``session``, ``limits``,
    ``client``, ``task_queue``, ``id_prefix``...)."""
    run = RunCode(tools, **options)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        code = json.loads(arguments or "{}").get("code", "")
        if workflow.in_workflow():
            return as_text(await run.in_workflow(code, ctx.tool_call_id))
        return as_text(await run.outcome(code, ctx.tool_call_id))

    async def needs_approval(_ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        if workflow.in_workflow():
            return False  # the approval waits inside the tool, in the child execution
        _, got = await run.until_parked(str(params.get("code", "")), call_id)
        return isinstance(got, ExecutionStatus)

    tool = FunctionTool(
        name=run.name,
        description=run.description(),
        params_json_schema=CODE_SCHEMA,
        on_invoke_tool=invoke,
        strict_json_schema=True,
        needs_approval=needs_approval,
    )
    tool.codemode = run  # type: ignore[attr-defined]  (execution_id_of reads it)
    return tool


def execution_id_of(tool: FunctionTool, call_id: str) -> str:
    """The execution a call of ``tool`` started outside a workflow (what a person decides in;
    the interruption's ``item.raw_item.call_id`` is the call id)."""
    run: RunCode = tool.codemode  # type: ignore[attr-defined]
    return run.execution_id(call_id)


def snippet_tool(tool: SnippetTool, **options: Any) -> FunctionTool:
    """A saved snippet as a tool of its own (``codemode.integrations.snippet_tools``): its
    schema, its docstring; a call runs the snippet's call as one durable execution (inside a
    workflow, the agent workflow's child; outside, started idempotently and waited for)."""
    run = RunCode(None, **options)

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        args = json.loads(arguments or "{}")
        if workflow.in_workflow():
            return as_text(await run.snippet_in_workflow(tool, args, ctx.tool_call_id))
        return as_text(await run.snippet_outcome(tool, args, ctx.tool_call_id))

    return FunctionTool(
        name=tool.name,
        description=tool.description,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
    )
