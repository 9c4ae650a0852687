"""Request, outcome, status and signal models shared by the workflow, activities and clients.

Everything here crosses a process boundary through the temporalio pydantic data converter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator
from temporalio.common import SearchAttributeKey

from codemode.activities.artifact_refs import Artifact  # noqa: F401 (re-exported for clients)
from codemode.activities.models import CellEnd, CellStart
from codemode.activities.records import (  # noqa: F401 (shared with the activities; re-exported for clients)
    EXECUTION_WORKFLOW_TYPE,
    ApprovalRecord,
    CallStatus,
    ErrorInfo,
    ToolCallRecord,
)
from codemode.approvals.signing import DecisionSignature
from codemode.runtimes.types import CompactModel, ExecutionLimits, NetworkPolicy, SandboxOptions
from codemode.workflows.usage import SandboxUsage

TASK_QUEUE = "codemode"
WORKFLOW_TYPE = EXECUTION_WORKFLOW_TYPE
#: Keyword search attributes kept current by the workflow (pre-registered by `codemode server`).
SA_STATUS = "CodeModeStatus"
SA_RUNTIME = "CodeModeRuntime"
STATUS_KEY = SearchAttributeKey.for_keyword(SA_STATUS)
RUNTIME_KEY = SearchAttributeKey.for_keyword(SA_RUNTIME)
#: The pseudo call id under which `require_code_approval` parks before the code runs.
CODE_APPROVAL_ID = "code"

#: The words every surface uses (CLI, search attribute, memo, status query).
ExecutionState = Literal["running", "awaiting_approval", "completed", "failed", "cancelled", "timed_out"]


#: What a session may be called: it becomes part of workflow ids (``session:NAME``,
#: ``session:NAME:3``) and object-store keys.
SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


class InvalidSessionName(ValueError):
    """A session name that cannot be an id."""


def check_session_name(name: str) -> str:
    if not isinstance(name, str) or not SESSION_NAME.fullmatch(name):
        raise InvalidSessionName(
            f"invalid session name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-', starting with a "
            "letter or digit"
        )
    return name


class CodeExecutionRequest(CompactModel):
    code: str
    runtime: str = "monty"
    inputs: dict[str, Any] = Field(default_factory=dict)
    tools: list[str] | None = None
    """Allow-list of tool names the code may call (None = every registered tool)."""
    limits: ExecutionLimits = Field(default_factory=ExecutionLimits)
    approval_timeout: timedelta = timedelta(days=7)
    require_code_approval: bool = False
    """Park before the code runs, with the code shown for review (call id ``code``)."""
    index_search_attributes: bool = True
    """Keep the CodeModeStatus/CodeModeRuntime search attributes current. Clients turn this off on
    a server where they are not registered (upserting them would fail the run)."""
    mounts: dict[str, str] = Field(default_factory=dict)
    """Host directories mounted read-only in the sandbox (host path -> sandbox path)."""
    network: NetworkPolicy = "none"
    """``none`` (default), ``full``, or ``ratchet``: network until a private tool's first result."""
    packages: list[str] = Field(default_factory=list)
    """Packages the code needs beyond what the sandbox has (runtimes that install them)."""
    session: str | None = None
    """Run the code as the next cell of this session (``client/sessions.py``): it sees the
    globals the session's earlier cells left. Created by its first cell."""
    restart: bool = False
    """Clear the session's namespace before this cell (a fresh interpreter)."""
    cell: CellStart | None = None
    """Set by the session workflow for the cell's execution (never by a caller)."""
    started_by: str | None = None
    """Who started the run, by their name in the approvers file (``start_execution`` fills in
    ``CODEMODE_USER`` or the OS user): a tool rule with ``four_eyes`` refuses their decisions."""

    @field_validator("session")
    @classmethod
    def _valid_session_name(cls, name: str | None) -> str | None:
        return None if name is None else check_session_name(name)

    @model_validator(mode="after")
    def _valid_sandbox_options(self) -> CodeExecutionRequest:
        self.sandbox_options()  # a bad mount path is refused when the request is made
        return self

    def sandbox_options(self) -> SandboxOptions | None:
        """The sandbox options the request asks for; None when it asks for nothing special."""
        options = SandboxOptions(mounts=self.mounts, network=self.network, packages=self.packages)
        return None if options.is_default else options


class ExecutionOutcome(CompactModel):
    execution_id: str
    runs: int = 1
    """How many workflow runs the execution took (continue-as-new keeps long runs small)."""
    success: bool
    output: Any = None
    stdout: str = ""
    error: ErrorInfo | None = None
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    duration_ms: float = 0.0
    runtime: str = "monty"
    cell: CellEnd | None = None
    """A cell of a session: the session after it (its state, its globals)."""
    artifacts: list[Artifact] = Field(default_factory=list)
    """Files the code handed back (``save_artifact``, the outputs directory): references; the bytes
    are in the object store (``codemode artifacts ID NAME``)."""
    usage: dict[str, SandboxUsage] = Field(default_factory=dict)
    """What its sandboxes cost, per runtime: seconds running and paused, sandboxes created, journal
    replays (``workflows/usage.py``)."""


class PendingApproval(BaseModel):
    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    summary: str = ""
    #: The call's arguments by parameter name, and the schemas a person's edit of them and an
    #: answer instead of the tool must fit (None on calls recorded before they were kept).
    arguments: dict[str, Any] | None = None
    parameters_schema: dict[str, Any] | None = None
    returns_schema: dict[str, Any] | None = None
    #: The code's line that made the call; when it began to wait, and until when.
    line: int | None = None
    asked_at: datetime | None = None
    deadline: datetime | None = None
    #: Why it waits, when a rule or predicate of its arguments decided so.
    reason: str | None = None
    #: Only a decision signed by a person the worker's approvers file allows counts.
    signed: bool = False
    #: Whether the worker's gate said it tells people (``ApprovalGate.notify``): a run of the
    #: current generation starts notify workflows for the call only then.
    notify: bool = False


class IgnoredSignal(BaseModel):
    """A decision that could not be applied, kept so nobody waits days on a typo."""

    signal: str
    payload: str
    reason: str


class HeldDecision(BaseModel):
    """A decision for a call that was not waiting yet when it came (its review under way, or the
    step that makes it not yet taken in): it applies when the call begins to wait, and is listed
    as ignored, with why, if the call never does (a rule decided it, or the run ended first)."""

    signal: str
    call_id: str
    payload: str


class ExecutionStatus(BaseModel):
    state: ExecutionState
    runtime: str = "monty"
    pending_approvals: list[PendingApproval] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """The calls from index ``calls_from`` on (a long run answers in pages: ``status(since)``)."""
    calls_from: int = 0
    call_count: int = 0
    runs: int = 1
    stdout: str = ""
    error: ErrorInfo | None = None
    ignored_signals: list[IgnoredSignal] = Field(default_factory=list)
    #: Decisions waiting for their call to wait (``HeldDecision``), in the order they came.
    held_decisions: list[HeldDecision] = Field(default_factory=list)


class ApproveSignal(BaseModel):
    call_id: str
    by: str | None = None
    comment: str | None = None
    #: Required when the worker has an approvers file (``approvals/signing.py``).
    signature: DecisionSignature | None = None


class DenySignal(BaseModel):
    call_id: str
    by: str | None = None
    reason: str | None = None
    signature: DecisionSignature | None = None


class Answer(BaseModel):
    """A person's answer given instead of running the tool: ``value`` is the call's result."""

    value: Any = None


class Decision(BaseModel):
    """Input of the ``decide`` Update: approve or deny a pending call, and say who decides."""

    call_id: str | None = None
    approve: bool
    by: str
    comment: str | None = None
    #: Edited arguments approved instead of the asked ones (parameter name -> value), checked
    #: against the tool's schema before the call runs. None: the asked arguments.
    arguments: dict[str, Any] | None = None
    #: The person answers instead of the tool: the call's result is this value and the tool
    #: does not run. None: the tool runs (when approved).
    answer: Answer | None = None
    #: The door the decision came through: cli, inbox, link, mcp, pydantic-ai, signal, ui.
    door: str | None = None
    #: The decision's Ed25519 signature (``sign_decision``): required when the worker has an
    #: approvers file; then the signer (or whom a service signed for) is who decided.
    signature: DecisionSignature | None = None


#: Keys a person may use in an approve/deny signal (the UI's "Send a Signal" box is free JSON).
_CALL_KEYS = ("call_id", "callId", "id")
_BY_KEYS = ("by", "approver", "user")
_TEXT_KEYS = ("comment", "reason", "note")
#: Read by the approvals bookkeeping (``workflows/approvals.py``), not here.
_SIGNATURE_KEYS = ("signature",)
#: Who a decision is recorded as when the signal names nobody.
ANONYMOUS = "anonymous"


def read_decision(
    signal: str, payload: Any, pending: Collection[str]
) -> tuple[str, str, str | None] | IgnoredSignal:
    """``(call_id, by, comment)`` from an approve/deny signal's payload, or why it is ignored.

    Lenient where there is no doubt about what a person meant: the call id as a number, as a
    bare value, or left out when exactly one call is pending; ``callId`` for ``call_id``.
    Strict where a mistake could approve the wrong thing: an unknown key, a call that is not
    pending. Shared by the workflow and the audit, so both say the same."""
    shown = _short_json(payload)

    def ignored(reason: str) -> IgnoredSignal:
        return IgnoredSignal(signal=signal, payload=shown, reason=reason)

    by: Any = None
    text: Any = None
    call: Any = None
    if isinstance(payload, dict):
        unknown = [k for k in payload if k not in (*_CALL_KEYS, *_BY_KEYS, *_TEXT_KEYS, *_SIGNATURE_KEYS)]
        if unknown:
            return ignored(
                f"unknown field(s) {', '.join(map(repr, unknown))}: send {{\"call_id\": \"1\", \"by\": \"your name\"}}"
            )
        call = next((payload[k] for k in _CALL_KEYS if k in payload), None)
        by = next((payload[k] for k in _BY_KEYS if k in payload), None)
        text = next((payload[k] for k in _TEXT_KEYS if k in payload), None)
    elif payload is not None and not isinstance(payload, (list, float)):
        call = payload  # a bare call id: "1" or 1
    elif payload is not None:
        return ignored("the input must be an object such as {\"call_id\": \"1\", \"by\": \"your name\"}")
    if isinstance(call, bool) or (call is not None and not isinstance(call, (str, int))):
        return ignored(f"call_id must be a string or a number, not {type(call).__name__}")
    if call is None or call == "":
        if len(pending) != 1:
            waiting = _ids(pending)
            return ignored(f"no call_id given and {len(pending)} calls are pending (pending: {waiting})")
        call = next(iter(pending))
    call = str(call)
    if call not in pending:
        waiting = _ids(pending)
        return ignored(f"call {call} is not waiting for a decision (pending: {waiting})")
    if by is not None and not isinstance(by, str):
        return ignored(f"by must be a name, not {type(by).__name__}")
    if text is not None and not isinstance(text, str):
        text = _short_json(text)
    return call, (by or "").strip() or ANONYMOUS, text


def call_order(call_id: str) -> tuple[int, str]:
    """The documented order of call ids wherever several are listed (status, memo, CLI): "2"
    before "10", the code's review ("code") first."""
    return (len(call_id), call_id) if call_id != CODE_APPROVAL_ID else (0, "")


def decision_target(payload: Any) -> str | None:
    """The call an approve/deny signal names explicitly (as ``read_decision`` reads it), or None
    when it names none or cannot be read."""
    call: Any = payload
    if isinstance(payload, dict):
        call = next((payload[k] for k in _CALL_KEYS if k in payload), None)
    if isinstance(call, bool) or not isinstance(call, (str, int)) or call == "":
        return None
    return str(call)


def _ids(pending: Collection[str]) -> str:
    return ", ".join(sorted(pending, key=call_order)) or "none"


def _short_json(value: Any, limit: int = 200) -> str:
    try:
        text = json.dumps(value, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
