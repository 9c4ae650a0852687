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

from codemode.approvals.signing import DecisionSignature
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
    #: ``counted``: only in the ``decide`` Update's answer, when a call needs more distinct
    #: approvers (``required`` in the approvers file) and this one was counted.
    decision: Literal["approved", "denied", "timed_out", "counted"]
    by: str | None = None
    comment: str | None = None
    #: The arguments the call asked for and, when a person edited them, the ones approved.
    asked_arguments: dict[str, Any] | None = None
    approved_arguments: dict[str, Any] | None = None
    #: A person answered instead of the tool (the tool did not run).
    answered: bool = False
    #: The door the decision came through (cli, inbox, link, mcp, pydantic-ai, signal, ui).
    door: str | None = None
    #: Under an approvers file: the verified signatures that decided (one per distinct
    #: approver; each names its signer, key and on whose behalf), the rule that said who may
    #: decide (``tools.send_email``) or the policy rule that decided without a person
    #: (``policy.own-domain-mail``), and the SHA-256 of the file in force.
    signatures: list[DecisionSignature] = Field(default_factory=list)
    rule: str | None = None
    approvers_file: str | None = None
    #: Approvals still needed (``counted`` answers only).
    needed: int = 0


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


def preview(value: object, limit: int = 200) -> str:
    """The start of a large result, for the audit record (the whole value is in the journal):
    made by the tool activity for a value the workflow passes on as JSON text."""
    if isinstance(value, list):
        head = f"[{len(value)} items] "
        first = value[:1]
    elif isinstance(value, dict):
        head = f"{{{len(value)} keys}} "
        first = list(value)[:8]
    else:
        head, first = "", value
    text = head + repr(first)
    return text if len(text) <= limit else text[: limit - 1] + "…"
