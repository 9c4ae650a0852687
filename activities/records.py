"""Records of a run that the activities write and the workflow keeps: errors ready for a model,
approval decisions, and one record per logical tool call.

They live below the workflow layer because activities build them (a step's error, a call's
audit record) and the workflow, clients and CLI read them; ``codemode.workflows.models`` re-exports
them. They cross process boundaries through the pydantic data converter, as ``CompactModel``s
(a field at its default is left out of the JSON: a run's outcome carries one record per call,
issue 40), so a field's default is part of the history format: change one only with a new field.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from codemode.runtimes.types import CompactModel

#: The workflow type of a code execution: its executions own what the activities store
#: (payloads, checkpoints), which the retention sweep finds by it.
EXECUTION_WORKFLOW_TYPE = "CodeExecutionWorkflow"
#: The workflow type of a session (``workflows/session_workflow.py``): it owns the session's state.
SESSION_WORKFLOW_TYPE = "CodeSessionWorkflow"

CallStatus = Literal["pending", "awaiting_approval", "running", "ok", "error", "denied", "timed_out", "cancelled"]


class ErrorInfo(CompactModel):
    """An error ready to show a model: Python type name, message and line."""

    type: str
    message: str
    #: Category: syntax, type, runtime, timeout, resource, capability, nondeterminism, denied, sandbox.
    kind: str = "runtime"
    line: int | None = None
    traceback: str | None = None


class ApprovalRecord(CompactModel):
    decision: Literal["approved", "denied", "timed_out"]
    by: str | None = None
    comment: str | None = None
    #: The arguments the call asked for and, when a person edited them, the ones approved.
    asked_arguments: dict[str, Any] | None = None
    approved_arguments: dict[str, Any] | None = None
    #: A person answered instead of the tool (the tool did not run).
    answered: bool = False
    #: The door the decision came through (cli, inbox, link, mcp, pydantic-ai, signal, ui).
    door: str | None = None


class ToolCallRecord(CompactModel):
    """One logical tool call: one call_id across every attempt and every worker."""

    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    status: CallStatus = "pending"
    #: The result, when it is small; a large one lives in the journal and the tool's activity
    #: result, and the record keeps its size and the start of its JSON.
    result: Any = None
    result_size: int = 0
    result_preview: str | None = None
    error: ErrorInfo | None = None
    attempts: int = 0
    approval: ApprovalRecord | None = None
    #: ``get_weather(city='Paris')``
    summary: str = ""
