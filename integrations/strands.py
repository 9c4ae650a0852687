"""``run_code`` for Strands Agents: ``codemode.strands.run_code_tool(...)``, an async
``@tool(context=True)``.

* **Inside a workflow** (``temporalio.strands_agents.StrandsPlugin`` and its ``TemporalAgent``,
  called with ``await agent.invoke_async(...)``): the tool starts the execution as the agent
  workflow's child, its id from the workflow's id and ``tool_context.tool_use["toolUseId"]``,
  and waits for it there; a call that needs a person's approval waits inside the tool with
  nothing live.
* **Outside a workflow**: Strands' interrupts. The tool starts the execution (idempotently,
  keyed by the call id) and waits until it finishes or parks; when it parks it raises the
  interrupt ``codemode-approval`` (its reason: the execution id, the pending calls, the command
  that decides them), and the agent stops with ``stop_reason == "interrupt"`` while a person
  decides (``codemode approve``). Resumed with an ``interruptResponse``, Strands runs the tool
  again: it finds the same execution and returns its outcome; nothing in the code runs twice.

Needs the ``strands`` extra, in an environment without the ``mcp`` extra (Strands pins
``mcp<2``): ``pip install 'durable-codemode[strands]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from strands import ToolContext, tool
from strands import tool as tool_decorator
from temporalio import workflow

from codemode.integrations.run_code import RunCode, as_text, pending_summary
from codemode.integrations.snippet_tools import SnippetTool, with_signature
from codemode.workflows.models import ExecutionStatus

if TYPE_CHECKING:
    from codemode.activities.tools import ToolRegistry

__all__ = ["INTERRUPT_NAME", "run_code_tool", "snippet_tool"]

#: The name of the interrupt the tool raises outside a workflow.
INTERRUPT_NAME = "codemode-approval"


def run_code_tool(tools: str | ToolRegistry | None = None, **options: Any) -> Any:
    """A ``run_code(code)`` tool whose every run is a durable execution (options: those of
    ``codemode.integrations.run_code.RunCode``: ``runtime``, ``session``, ``limits``,
    ``client``, ``task_queue``, ``id_prefix``...)."""
    run = RunCode(tools, **options)

    async def run_code(code: str, tool_context: ToolContext) -> str:
        """Run Python code durably.

        Args:
            code: The Python code to run.
        """
        call_id = str(tool_context.tool_use.get("toolUseId") or "call")
        if workflow.in_workflow():
            return as_text(await run.in_workflow(code, call_id))
        execution_id, got = await run.until_parked(code, call_id)
        if isinstance(got, ExecutionStatus):
            # Raises the first time (the agent stops); resumed, returns the person's response.
            tool_context.interrupt(INTERRUPT_NAME, reason=pending_summary(execution_id, got))
        return as_text(await run.outcome(code, call_id))

    return tool(name=run.name, description=run.description(), context=True)(run_code)


def snippet_tool(tool: SnippetTool, **options: Any) -> Any:
    """A saved snippet as a tool of its own (``codemode.integrations.snippet_tools``): its
    parameters, its docstring; a call runs the snippet's call as one durable execution (inside
    a workflow, the agent workflow's child; outside, started idempotently and waited for)."""
    import inspect

    run = RunCode(None, **options)

    async def run_snippet(tool_context: ToolContext, **arguments: Any) -> str:
        call_id = str(tool_context.tool_use.get("toolUseId") or "call")
        if workflow.in_workflow():
            return as_text(await run.snippet_in_workflow(tool, arguments, call_id))
        return as_text(await run.snippet_outcome(tool, arguments, call_id))

    context = inspect.Parameter("tool_context", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
    fn = with_signature(run_snippet, tool, trailing=[context])
    return tool_decorator(name=tool.name, description=tool.description, context=True)(fn)
