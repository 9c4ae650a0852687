"""``run_code`` for Google ADK agents: ``codemode.adk.run_code_tool(...)``, an async function
tool (a ``FunctionTool``).

* **Inside a workflow** (``temporalio.google_adk.GoogleAdkPlugin`` runs the agent loop as
  workflow code): the tool starts the execution as the agent workflow's child, its id from the
  workflow's id and ``tool_context.function_call_id``, and waits for it there; a call that needs
  a person's approval waits inside the tool with nothing live.
* **Outside a workflow**: ADK's tool confirmation. The tool starts the execution (idempotently,
  keyed by the ADK session and the call id) and waits until it finishes or parks; when it parks
  it calls ``tool_context.request_confirmation(...)`` with the pending calls, and the run pauses
  on an ``adk_request_confirmation`` call while a person decides (``codemode approve``). Answer it
  (``temporalio.google_adk.hitl_confirmation_response(id, confirmed=True)`` in the next user
  message): ADK invokes the tool again, which finds the same execution and returns its outcome;
  nothing in the code runs twice.

Needs the ``google-adk`` extra: ``pip install 'durable-codemode[google-adk]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from google.adk.tools import FunctionTool, ToolContext
from temporalio import workflow

from codemode.integrations.run_code import RunCode, pending_summary
from codemode.integrations.snippet_tools import SnippetTool, with_signature
from codemode.workflows.models import ExecutionStatus

if TYPE_CHECKING:
    from codemode.activities.tools import ToolRegistry

__all__ = ["run_code_tool", "snippet_tool"]


def run_code_tool(tools: str | ToolRegistry | None = None, **options: Any) -> FunctionTool:
    """A ``run_code(code)`` tool whose every run is a durable execution (options: those of
    ``codemode.integrations.run_code.RunCode``: ``runtime``, ``session``, ``limits``,
    ``client``, ``task_queue``, ``id_prefix``...)."""
    run = RunCode(tools, **options)

    async def run_code(code: str, tool_context: ToolContext) -> dict[str, Any]:
        call_id = tool_context.function_call_id or "call"
        if workflow.in_workflow():
            return dict(await run.in_workflow(code, call_id))
        scope = tool_context.session.id if tool_context.session is not None else None
        if tool_context.tool_confirmation is None:  # the first invocation of this call
            execution_id, got = await run.until_parked(code, call_id, scope)
            if isinstance(got, ExecutionStatus):
                summary = pending_summary(execution_id, got)
                tool_context.request_confirmation(hint=summary["decide"], payload=summary)
                # The pause is no result for the model to answer (else it calls the tool again).
                tool_context.actions.skip_summarization = True
                return {"waiting_for_approval": summary}
        return dict(await run.outcome(code, call_id, scope))

    run_code.__name__ = run_code.__qualname__ = run.name
    run_code.__doc__ = run.description()
    run_code.__annotations__ = {"code": str, "tool_context": ToolContext, "return": dict[str, Any]}
    return FunctionTool(run_code)


def snippet_tool(tool: SnippetTool, **options: Any) -> FunctionTool:
    """A saved snippet as a tool of its own (``codemode.integrations.snippet_tools``): its
    parameters, its docstring; a call runs the snippet's call as one durable execution (inside
    a workflow, the agent workflow's child; outside, keyed by the ADK session and the call)."""
    import inspect

    run = RunCode(None, **options)

    async def run_snippet(tool_context: ToolContext, **arguments: Any) -> dict[str, Any]:
        call_id = tool_context.function_call_id or "call"
        if workflow.in_workflow():
            return dict(await run.snippet_in_workflow(tool, arguments, call_id))
        scope = tool_context.session.id if tool_context.session is not None else None
        return dict(await run.snippet_outcome(tool, arguments, call_id, scope))

    context = inspect.Parameter("tool_context", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext)
    return FunctionTool(with_signature(run_snippet, tool, trailing=[context]))
