"""Request, outcome, status and signal models shared by the workflow, activities and clients.

Everything here crosses a process boundary through the temporalio pydantic data converter.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field

from runtimes.types import ExecutionLimits

TASK_QUEUE = "codemode"
WORKFLOW_TYPE = "CodeExecutionWorkflow"
#: Keyword search attributes kept current by the workflow (pre-registered by `codemode server`).
SA_STATUS = "CodeModeStatus"
SA_RUNTIME = "CodeModeRuntime"
#: The pseudo call id under which `require_code_approval` parks before the code runs.
CODE_APPROVAL_ID = "code"

CallStatus = Literal["pending", "awaiting_approval", "running", "ok", "error", "denied", "timed_out", "cancelled"]
#: The words every surface uses (CLI, search attribute, memo, status query).
ExecutionState = Literal["running", "awaiting_approval", "completed", "failed", "cancelled", "timed_out"]


class ErrorInfo(BaseModel):
    """An error ready to show a model: Python type name, message and line."""

    type: str
    message: str
    #: Category: syntax, type, runtime, timeout, resource, capability, nondeterminism, denied, sandbox.
    kind: str = "runtime"
    line: int | None = None
    traceback: str | None = None


class ApprovalRecord(BaseModel):
    decision: Literal["approved", "denied", "timed_out"]
    by: str | None = None
    comment: str | None = None


class ToolCallRecord(BaseModel):
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


class CodeExecutionRequest(BaseModel):
    code: str
    runtime: str = "monty"
    inputs: dict[str, Any] = Field(default_factory=dict)
    #: Allow-list of tool names the code may call (None = every registered tool).
    tools: list[str] | None = None
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)
    approval_timeout: timedelta = timedelta(days=7)
    #: Park before the code runs, with the code shown for review (call id ``code``).
    require_code_approval: bool = False
    #: Keep the CodeModeStatus/CodeModeRuntime search attributes current. Clients turn this
    #: off on a server where they are not registered (upserting them would fail the run).
    index_search_attributes: bool = True


class ExecutionOutcome(BaseModel):
    execution_id: str
    #: How many workflow runs the execution took (continue-as-new keeps long runs small).
    runs: int = 1
    success: bool
    output: Any = None
    stdout: str = ""
    error: ErrorInfo | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    duration_ms: float = 0.0
    runtime: str = "monty"


class PendingApproval(BaseModel):
    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    summary: str = ""


class ExecutionStatus(BaseModel):
    state: ExecutionState
    runtime: str = "monty"
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    #: The calls from index ``calls_from`` on (a long run answers in pages: ``status(since)``).
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    calls_from: int = 0
    call_count: int = 0
    runs: int = 1
    stdout: str = ""
    error: ErrorInfo | None = None


class ApproveSignal(BaseModel):
    call_id: str
    by: str | None = None
    comment: str | None = None


class DenySignal(BaseModel):
    call_id: str
    by: str | None = None
    reason: str | None = None
