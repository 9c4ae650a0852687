"""``run_code`` for any agent framework: the framework-neutral part every adapter shares
(``codemode.openai_agents``, ``.adk``, ``.langgraph``, ``.strands``, and the pydantic-ai
capability's in-workflow path).

An adapter only declares the tool in its framework's shape (always ``async def``: the
frameworks run a sync tool in a thread, which a workflow cannot), takes the call id from its
framework's context and hands the result back. This module does the rest:

* **Inside a workflow** (the framework's Temporal plugin runs the agent loop as workflow code):
  ``RunCode.in_workflow`` starts the execution as a child workflow whose id comes from the agent
  workflow's id and the tool call's id (a counter tells apart ids a test model repeats), so a
  replayed agent finds the same child; an approval waits inside the tool with nothing live. With
  ``session=True`` the calls are cells of one session that is the agent workflow's child.
* **Outside a workflow**: ``RunCode.start`` starts the execution idempotently (its id keyed by the
  call id), so the framework's own human-in-the-loop idiom can stop the run and the resumed run,
  which calls the tool again, finds the same execution instead of running the code twice.

The outcome goes back to the model as data (``run_code_result``): every failure, a syntax error
included, is in-band (``success: false``, the error with its line), and a denied call is the
``PermissionError`` the code saw.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import workflow
from typing_extensions import TypedDict

from codemode.client.decision_hints import decide_all_hint
from codemode.runtimes import ExecutionLimits, code_mode_prompt
from codemode.workflows.child_execution import execute_code
from codemode.workflows.child_session import run_session_cell
from codemode.workflows.models import TASK_QUEUE, CodeExecutionRequest, ExecutionOutcome, ExecutionStatus
from codemode.workflows.session_models import DEFAULT_IDLE_TIMEOUT

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

    from codemode.activities.tools import ToolRegistry

#: The tool's description before the prompt (the rules and the stubs of the functions).
TOOL_DESCRIPTION = (
    "Run Python code that calls the functions below. Returns JSON: `output` (the value of the last "
    "expression), `stdout`, `error` (type, message, line) when it failed, and the tool calls it made. "
    "Each run is durable: tool calls are retried and audited, and risky calls wait for a person's "
    "approval (a denied call raises PermissionError in the code)."
)
#: How many tool calls the result lists (the rest are counted): the audit has them all.
CALLS_SHOWN = 20
#: Errors the model fixes by rewriting the code: the code did not run.
RETRY_KINDS = frozenset({"syntax", "type"})
#: The checker's diagnostic (the code excerpt, expected and found types) is kept up to this size.
DIAGNOSTIC_CHARS = 2000

_UNSAFE_ID = re.compile(r"[^A-Za-z0-9._:-]")
#: Prompts already built, by (tools module, runtime): the registry is imported once per process.
_PROMPTS: dict[tuple[str, str], str] = {}


class ErrorReturn(TypedDict):
    type: str
    message: str
    line: int | None


class CallReturn(TypedDict):
    tool: str
    summary: str
    status: str


class ArtifactReturn(TypedDict):
    name: str
    mime_type: str
    size: int


class RunCodeReturn(TypedDict, total=False):
    success: bool
    output: Any
    stdout: str
    error: ErrorReturn | None
    execution_id: str
    tool_calls: list[CallReturn]
    more_tool_calls: int
    duration_ms: float
    #: Files the code handed back (``save_artifact``, the outputs directory).
    artifacts: list[ArtifactReturn]
    #: With a session: its name and this call's cell number in it.
    session: str
    cell: int
    #: Something the model must know beyond the outcome (its session had closed; how to fix code
    #: that did not run).
    notice: str


def retry_message(error: Any) -> str:
    """What a model is told when its code did not run: the error, where, the checker's own
    diagnostic when there is one, and what to do."""
    where = f" (line {error.line})" if error.line else ""
    text = f"{error.type}{where}: {error.message}"
    detail = (error.traceback or "").strip()
    if detail and detail != error.message:
        text += "\n" + detail[:DIAGNOSTIC_CHARS]
    return text + "\nFix the code and call the tool again."


def run_code_result(
    outcome: ExecutionOutcome,
    *,
    session: str | None = None,
    cell: int | None = None,
    notice: str | None = None,
    fix_hint: bool = True,
) -> RunCodeReturn:
    """What ``run_code`` returns to the model for ``outcome`` (every failure in-band; with
    ``fix_hint``, code that did not run says how to fix it in ``notice``)."""
    error = outcome.error
    calls = outcome.tool_calls
    shown: RunCodeReturn = {
        "success": outcome.success,
        "output": outcome.output,
        "stdout": outcome.stdout,
        "error": None if error is None else {"type": error.type, "message": error.message, "line": error.line},
        "execution_id": outcome.execution_id,
        "tool_calls": [{"tool": c.tool, "summary": c.summary, "status": c.status} for c in calls[:CALLS_SHOWN]],
        "duration_ms": round(outcome.duration_ms, 1),
    }
    if len(calls) > CALLS_SHOWN:
        shown["more_tool_calls"] = len(calls) - CALLS_SHOWN
    if outcome.artifacts:
        shown["artifacts"] = [{"name": a.name, "mime_type": a.mime_type, "size": a.size} for a in outcome.artifacts]
    if session is not None:
        shown["session"] = session
    if cell is not None:
        shown["cell"] = cell
    if fix_hint and error is not None and not outcome.success and error.kind in RETRY_KINDS:
        notice = f"{notice}\n{retry_message(error)}" if notice else retry_message(error)
    if notice:
        shown["notice"] = notice
    return shown


def as_text(result: RunCodeReturn) -> str:
    """The result as the JSON text a framework that wants a string shows its model."""
    return json.dumps(result, default=str)


def child_execution_id(parent_id: str, tool_name: str, call_id: str | None, *, retry: int = 0) -> str:
    """The execution id of a tool call made in a workflow: from what the parent's history fixes
    (its id, the tool call's id, the retry), so a replay finds the same child. A call id this
    workflow run already used (test models repeat theirs) gets a counter: ``-2``, ``-3``..."""
    call = _UNSAFE_ID.sub("_", call_id or "call")
    suffix = f"-r{retry}" if retry else ""
    base = f"{parent_id}-{tool_name}-{call}{suffix}"[:990]
    seen = _ids_used()
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}-{seen[base]}"


def _ids_used() -> dict[str, int]:
    """The child ids this workflow run gave out, kept on the workflow instance (so a replay,
    which builds a new instance, counts from the start again)."""
    instance = workflow.instance()
    used = getattr(instance, "_codemode_run_code_ids", None)
    if used is None:
        used = {}
        setattr(instance, "_codemode_run_code_ids", used)  # noqa: B010 (a name of ours on the user's instance)
    return used


def plugin_registry() -> ToolRegistry | None:
    """The tools of the ``CodeModePlugin`` that configured a worker in this process (the last one)."""
    with workflow.unsafe.imports_passed_through():  # the process's module, not a sandbox's copy
        from codemode.worker.plugin import configured_registry

    return configured_registry()


@dataclass
class RunCode:
    """What an adapter's ``run_code`` tool runs: its options, the prompt, and the two paths.

    :param tools: the tools module the code may call (``"my.tools"``), or a ``ToolRegistry``;
        None: the tools of the worker's ``CodeModePlugin`` (inside a workflow).
    :param runtime: the sandbox (``monty``, ``python``, ``e2b``...).
    :param session: inside a workflow, the calls are cells of one session that is the agent
        workflow's child (a later call sees what an earlier one defined); default: each call is
        an execution of its own.
    :param client: outside a workflow, a client with ``CodeModePlugin`` (default: ``codemode.connect()``).
    :param task_queue: where the executions run (default: the agent workflow's queue inside
        one; ``CODEMODE_TASK_QUEUE`` or ``codemode`` outside).
    :param id_prefix: outside a workflow, what execution ids start with before the call id
        (default ``run_code``; give each conversation its own when the model's call ids repeat,
        as test models' do).
    :param started_by: who the agent acts for, recorded on each execution: an approvers file's
        ``four_eyes`` rule keeps that person from deciding its calls. A name, or a function
        called at each run (inside a workflow it runs as workflow code). Default: inside a
        workflow, the agent workflow's memo ``started_by`` (start it with
        ``memo={"started_by": user}``); outside one, who runs this process, as ``codemode run``
        records.
    """

    tools: str | ToolRegistry | None = None
    _: KW_ONLY
    runtime: str = "monty"
    limits: ExecutionLimits | None = None
    approval_timeout: timedelta | None = None
    session: bool = False
    session_idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT
    name: str = "run_code"
    client: Client | None = field(default=None, repr=False)
    task_queue: str | None = None
    id_prefix: str | None = None
    started_by: str | Callable[[], str | None] | None = None
    #: Set the CodeModeStatus/CodeModeRuntime search attributes on the executions (the server
    #: must have them; ``codemode server`` registers them).
    index_search_attributes: bool = True

    # -- what the model is shown ----------------------------------------------------------

    def registry(self) -> ToolRegistry:
        from codemode.activities.tools import ToolRegistry

        if isinstance(self.tools, ToolRegistry):
            return self.tools
        if self.tools is None:
            registry = plugin_registry()
            if registry is None:
                raise ValueError(
                    "run_code_tool() without tools needs a worker with CodeModePlugin in this process: "
                    "pass tools='my.tools' (the module the worker's CodeModePlugin has)"
                )
            return registry
        with workflow.unsafe.imports_passed_through():
            return ToolRegistry.from_module(self.tools)

    def prompt(self) -> str:
        """The runtime's prompt with the tool stubs (what ``codemode tools`` prints). Built with
        the process's modules (the runtime's, the tools'), not a workflow sandbox's copies."""
        key = (self.tools, self.runtime) if isinstance(self.tools, str) else None
        if key is not None and key in _PROMPTS:
            return _PROMPTS[key]
        with workflow.unsafe.imports_passed_through():
            prompt = code_mode_prompt(self.runtime, self.registry().signatures())
        if key is not None:
            _PROMPTS[key] = prompt
        return prompt

    def description(self) -> str:
        """The tool's description: what it returns, then the prompt with the stubs."""
        return f"{TOOL_DESCRIPTION}\n\n{self.prompt()}"

    def request(self, code: str, *, restart: bool = False) -> CodeExecutionRequest:
        """The execution's request; ``restart``: a session's cell that starts from an empty
        namespace."""
        extra: dict[str, Any] = {}
        if self.limits is not None:
            extra["limits"] = self.limits
        if self.approval_timeout is not None:
            extra["approval_timeout"] = self.approval_timeout
        if (starter := self.starter()) is not None:
            extra["started_by"] = starter
        return CodeExecutionRequest(
            code=code,
            runtime=self.runtime,
            index_search_attributes=self.index_search_attributes,
            restart=restart,
            **extra,
        )

    def queue(self) -> str:
        """Where executions started from a client run: ``task_queue``, else
        ``CODEMODE_TASK_QUEUE``, else ``codemode``."""
        return self.task_queue or os.environ.get("CODEMODE_TASK_QUEUE") or TASK_QUEUE

    def starter(self) -> str | None:
        """Who the agent acts for (``started_by``), or None (outside a workflow, the start then
        records who runs this process)."""
        if callable(self.started_by):
            return self.started_by()
        if self.started_by is not None:
            return self.started_by
        if workflow.in_workflow():
            value = workflow.memo_value("started_by", None)
            return value if isinstance(value, str) and value else None
        return None

    # -- inside a workflow ------------------------------------------------------------------

    async def in_workflow(self, code: str, call_id: str | None, *, retry: int = 0) -> RunCodeReturn:
        """Run ``code`` as the agent workflow's child (or its session's next cell) and wait for
        its outcome, however long a person takes."""
        if not self.session:
            return run_code_result(await self.child(self.request(code), call_id, retry=retry))
        parent = workflow.info().workflow_id
        execution_id = child_execution_id(parent, self.name, call_id, retry=retry)
        cell = await run_session_cell(
            f"{parent}-{self.name}",
            self.request(code),
            request_id=execution_id,
            idle_timeout=self.session_idle_timeout,
            task_queue=self.task_queue,
        )
        return run_code_result(cell.outcome, session=cell.session, cell=cell.index)

    async def child(self, request: CodeExecutionRequest, call_id: str | None, *, retry: int = 0) -> ExecutionOutcome:
        """Run ``request`` as the agent workflow's child execution, its id from the agent
        workflow's id and the tool call's (``child_execution_id``), and wait for its outcome."""
        execution_id = child_execution_id(workflow.info().workflow_id, self.name, call_id, retry=retry)
        return await execute_code(request, id=execution_id, task_queue=self.task_queue)

    # -- outside a workflow -----------------------------------------------------------------

    def execution_id(self, call_id: str, scope: str | None = None) -> str:
        """The execution of a tool call outside a workflow: the same for the call's every
        invocation (a resumed run calls the tool again)."""
        parts = [self.id_prefix or self.name, scope, call_id]
        return "-".join(_UNSAFE_ID.sub("_", p) for p in parts if p)[:1000]

    async def get_client(self) -> Client:
        if self.client is None:
            from codemode.worker.connection import connect

            self.client = await connect()
        return self.client

    async def start(self, code: str, call_id: str, scope: str | None = None) -> WorkflowHandle[Any, ExecutionOutcome]:
        """Start the call's execution, or find it when an earlier invocation of the same call
        started it (running, parked or finished): the code never runs twice for one call."""
        if self.session:
            raise ValueError(
                "run_code(session=True) runs inside a workflow only; outside one, each call is an execution"
            )
        from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from codemode.client.executions import start_execution

        client = await self.get_client()
        execution_id = self.execution_id(call_id, scope)
        try:
            return await start_execution(
                client,
                self.request(code),
                execution_id=execution_id,
                task_queue=self.queue(),
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:  # it finished: its outcome is the call's result
            return client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)

    async def until_parked(
        self, code: str, call_id: str, scope: str | None = None
    ) -> tuple[str, ExecutionOutcome | ExecutionStatus]:
        """Start (or find) the call's execution and wait until it finishes or parks on a
        person's decision (then its status, with the pending calls). Returns its id too."""
        from codemode.client.following import wait_for_outcome

        handle = await self.start(code, call_id, scope)
        return handle.id, await wait_for_outcome(handle, until_parked=True)

    async def outcome(self, code: str, call_id: str, scope: str | None = None) -> RunCodeReturn:
        """Start (or find) the call's execution and wait for its outcome."""
        handle = await self.start(code, call_id, scope)
        return run_code_result(await handle.result())


def pending_summary(execution_id: str, status: ExecutionStatus) -> dict[str, Any]:
    """What a framework's approval request carries about a parked execution: its id, the calls
    waiting and how a person decides them."""
    return {
        "execution_id": execution_id,
        "pending_approvals": [p.model_dump(mode="json") for p in status.pending_approvals],
        "decide": decide_all_hint(execution_id),
    }
