"""``DurableCodeMode``: a pydantic-ai capability that gives an agent one ``run_code(code,
restart=False)`` tool, whose every run is a durable code execution on Temporal.

The model is shown the runtime's prompt with the tool stubs (the text ``codemode tools``
prints) as instructions, and one tool. By default (``session=True``) the calls of a
conversation are cells of one durable session (``session.py``): a later call sees the
variables, functions and imports an earlier one left, and ``restart=True`` starts from an
empty namespace. With ``session=False`` each call is an execution of its own
(``run_code(code)``). What happens when the code runs:

* **Outside a workflow** (an agent in a web app or a script): the tool starts the execution
  through a Temporal client and waits for its outcome. If a call of the code needs a person's
  approval and ``wait_for_approval`` is false, the tool raises ``CallDeferred`` with the
  execution id and the pending calls: the agent run ends with ``DeferredToolRequests`` and
  nothing is held while the person decides (``codemode approve``, the web UI, or
  ``decide()``). Later, from any process, ``deferred_results(requests)`` waits for those
  executions and gives the ``DeferredToolResults`` that resume the agent. With a session,
  the execution is the call's cell (``session:NAME:N``), and the resumed run (same
  conversation) keeps the session.
* **Inside a workflow** (an agent under pydantic-ai's Temporal durability): the tool runs in
  workflow code (``metadata={"temporal": False}``). Without a session the execution is a
  child workflow whose id comes from the agent workflow's id and the tool call's id, so a
  replayed agent never starts a second one; with one, the session is the agent workflow's
  child and each call a cell sent to it by signal, its outcome signalled back
  (``workflows/child_session.py``). The agent waits through approvals with nothing live;
  cancelling the agent cancels the child. The worker needs ``CodeModePlugin``.

A syntax error or a type error against the stubs is a retry prompt for the model; anything
that happened while the code ran is the tool's return (``returns.py``). Approvals come only
from people: the model has no tool to decide them.

The capability stands on the same framework-neutral core as the other adapters
(``codemode.integrations.run_code.RunCode``, its ``core``): the tools and the prompt, the
request, the client, the task queue, and the child execution inside a workflow.
"""

from __future__ import annotations

import asyncio
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic_ai import CallDeferred, DeferredToolRequests, DeferredToolResults, RunContext, ToolReturn
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.tools import Tool
from pydantic_ai.toolsets import FunctionToolset
from temporalio import workflow

from codemode.client.decision_hints import decide_all_hint
from codemode.integrations.run_code import RunCode
from codemode.runtimes import ExecutionLimits
from codemode.workflows.child_session import run_session_cell
from codemode.workflows.models import (
    ApprovalRecord,
    CodeExecutionRequest,
    ExecutionOutcome,
    ExecutionStatus,
)
from codemode.workflows.session_models import CellTicket, replacement_name

from .artifacts import with_images
from .returns import RunCodeReturn, run_code_return
from .session import (
    AGENT_SESSION_IDLE_TIMEOUT,
    SESSION_DESCRIPTION,
    SESSION_INSTRUCTIONS,
    conversation_session_name,
    replaced_notice,
    workflow_session_name,
)

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.activities.tools import ToolRegistry
    from codemode.client.sessions import CellHandle

#: The tool's own description; the functions and the rules are in the instructions.
TOOL_DESCRIPTION = (
    "Run Python code that calls the functions described in the instructions. Returns the value of the "
    "last expression as `output`, what the code printed as `stdout`, and `error` (type, message, line) "
    "when it failed, and the `artifacts` (files) it saved; images among them are shown to you. Each run "
    "is durable: tool calls are retried and audited, and risky calls wait for a person's approval."
)

#: Sessions a conversation goes through at most (each one closed for a day or more).
MAX_GENERATIONS = 100

#: ``decide(answer=...)`` left out (None is an answer a person may give).
_NO_ANSWER: Any = object()


@dataclass
class DurableCodeMode(AbstractCapability[Any]):
    """One ``run_code(code, restart=False)`` tool whose runs are durable executions, the
    cells of one session per conversation.

    :param tools: the tools module the code may call (``"my.tools"``), or a ``ToolRegistry``.
        The worker that runs the executions must have the same tools (``CodeModePlugin``).
    :param client: a Temporal client made with ``codemode.connect()`` or with
        ``CodeModePlugin`` on it (default: ``codemode.connect()``: Temporal's profile and ``TEMPORAL_*`` variables, made on first use).
        Not used inside a workflow.
    :param task_queue: where the executions run (default ``CODEMODE_TASK_QUEUE`` or ``codemode``;
        inside a workflow, the agent workflow's own queue).
    :param runtime: the sandbox (``monty``, ``python``, ``e2b``...).
    :param limits: time, memory, tool calls and output per execution.
    :param wait_for_approval: outside a workflow, wait for a person's decision inside the tool
        call instead of ending the agent run with a deferred call.
    :param name: the tool's name as the model sees it.
    :param session: the calls of a conversation (inside a workflow: of the agent's workflow)
        share one durable session, and the tool takes ``restart``; False: each call is an
        execution of its own, and the tool takes ``code`` alone.
    :param session_idle_timeout: how long a session waits for its next call before it closes
        and deletes its state (a day: see ``session.AGENT_SESSION_IDLE_TIMEOUT``).
    """

    tools: str | ToolRegistry
    _: KW_ONLY
    client: Client | None = field(default=None, repr=False)
    task_queue: str | None = None
    runtime: str = "monty"
    limits: ExecutionLimits | None = None
    wait_for_approval: bool = False
    name: str = "run_code"
    approval_timeout: timedelta | None = None
    #: Set the CodeModeStatus/CodeModeRuntime search attributes on executions started as
    #: children (the server must have them; ``codemode server`` registers them).
    index_search_attributes: bool = True
    session: bool = True
    session_idle_timeout: timedelta = AGENT_SESSION_IDLE_TIMEOUT

    def __post_init__(self) -> None:
        self._toolset: FunctionToolset[Any] | None = None
        #: Outside a workflow: the session each conversation's calls go to now (its first
        #: name, or a successor once it closed), as far as this process knows.
        self._generations: dict[str, int] = {}
        #: Calls being sent to a session now, by (event loop, session).
        self._turns: dict[tuple[asyncio.AbstractEventLoop, str], _Turn] = {}

    @property
    def core(self) -> RunCode:
        """The framework-neutral core with this capability's options (the client it made)."""
        return RunCode(
            self.tools,
            runtime=self.runtime,
            limits=self.limits,
            approval_timeout=self.approval_timeout,
            name=self.name,
            client=self.client,
            task_queue=self.task_queue,
            index_search_attributes=self.index_search_attributes,
        )

    # -- what the model is shown ----------------------------------------------------------

    def registry(self) -> ToolRegistry:
        return self.core.registry()

    def prompt(self) -> str:
        """The runtime's prompt with the tool stubs (what ``codemode tools`` prints)."""
        return self.core.prompt()

    def get_instructions(self) -> Any:
        if self.session:
            return self.prompt() + "\n" + SESSION_INSTRUCTIONS.format(tool=self.name) + "\n"
        return self.prompt()

    def get_toolset(self) -> FunctionToolset[Any]:
        if self._toolset is None:
            tool = Tool(
                self._run_code_in_session if self.session else self._run_code,
                takes_ctx=True,
                name=self.name,
                description=TOOL_DESCRIPTION + (SESSION_DESCRIPTION if self.session else ""),
                # Runs in workflow code under Temporal durability (a child workflow is started
                # there, not in an activity); the code argument in pydantic-ai-harness's terms.
                metadata={"code_arg_name": "code", "temporal": False},
                include_return_schema=False,
            )
            self._toolset = FunctionToolset([tool], id=f"durable-code-mode-{self.name}")
        return self._toolset

    # -- the tool ---------------------------------------------------------------------------

    def request(self, code: str, *, restart: bool = False) -> CodeExecutionRequest:
        return self.core.request(code, restart=restart)

    async def _run_code(self, ctx: RunContext[Any], code: str) -> RunCodeReturn | ToolReturn:
        """Run Python code durably (see TOOL_DESCRIPTION)."""
        if workflow.in_workflow():
            return await self._run_in_workflow(ctx, code)
        return await self._run_from_client(code)

    async def _run_code_in_session(
        self, ctx: RunContext[Any], code: str, restart: bool = False
    ) -> RunCodeReturn | ToolReturn:
        """Run Python code durably, in the session of this conversation (see TOOL_DESCRIPTION).

        Args:
            code: the Python code to run.
            restart: start from an empty namespace: what earlier calls defined is gone.
        """
        if workflow.in_workflow():
            return await self._run_cell_in_workflow(ctx, code, restart)
        return await self._run_cell_from_client(ctx, code, restart)

    def session_name(self, ctx: RunContext[Any]) -> str:
        """The (first) name of the session this call belongs to: the conversation's outside a
        workflow, the agent workflow's inside one (``session.py``)."""
        if workflow.in_workflow():
            agent = getattr(ctx.agent, "name", None) if ctx.agent is not None else None
            return workflow_session_name(workflow.info().workflow_id, agent, self.name)
        return conversation_session_name(self.name, ctx.conversation_id or ctx.run_id or "run")

    async def _run_in_workflow(self, ctx: RunContext[Any], code: str) -> RunCodeReturn:
        return run_code_return(await self.core.child(self.request(code), ctx.tool_call_id, retry=ctx.retry))

    async def _run_cell_in_workflow(self, ctx: RunContext[Any], code: str, restart: bool) -> RunCodeReturn:
        # The request id: the same on a replay, distinct for each call and retry of the run.
        request_id = f"{ctx.run_id}/{ctx.tool_call_id or 'call'}/{ctx.retry}"
        cell = await run_session_cell(
            self.session_name(ctx),
            self.request(code, restart=restart),
            request_id=request_id,
            idle_timeout=self.session_idle_timeout,
            task_queue=self.task_queue,
        )
        notice = replaced_notice(cell.replaced) if cell.replaced and not restart else None
        return run_code_return(cell.outcome, session=cell.session, cell=cell.index, notice=notice)

    async def _run_cell_from_client(self, ctx: RunContext[Any], code: str, restart: bool) -> RunCodeReturn | ToolReturn:
        from codemode.client.following import wait_for_outcome

        cell, notice = await self._submit_cell(self.session_name(ctx), self.request(code, restart=restart))
        where = {"execution_id": cell.execution_id, "session": cell.session, "cell": cell.index}
        decide = decide_all_hint(cell.execution_id)
        if self.wait_for_approval:
            handle = await cell.started()
        else:
            handle = await cell.started_unless_held()
            if handle is None:  # queued behind a cell that waits for a person: so does this call
                raise CallDeferred(
                    metadata={**where, "pending_approvals": [], "waiting_for": cell.held_by, "decide": decide}
                )
        got = await wait_for_outcome(handle, until_parked=not self.wait_for_approval)
        if isinstance(got, ExecutionStatus):
            raise CallDeferred(
                metadata={
                    **where,
                    "pending_approvals": [p.model_dump(mode="json") for p in got.pending_approvals],
                    "decide": decide,
                }
            )
        shown = run_code_return(got, session=cell.session, cell=cell.index, notice=notice)
        return await with_images(await self.get_client(), got, shown)

    async def _submit_cell(self, base: str, request: CodeExecutionRequest) -> tuple[CellHandle, str | None]:
        """Send the cell to the conversation's session, or to its successor when it closed.
        Returns the cell's handle and, when a closed session left this cell a fresh
        namespace, what to tell the model."""
        # Calls the model made at once are sent in the order it made them (pydantic-ai starts
        # their tasks in that order; the lock's queue keeps it).
        key = (asyncio.get_running_loop(), base)
        turn = self._turns.setdefault(key, _Turn())
        turn.users += 1
        try:
            async with turn.lock:
                return await self._submit_in_turn(base, request)
        finally:
            turn.users -= 1
            if not turn.users:
                del self._turns[key]

    async def _submit_in_turn(self, base: str, request: CodeExecutionRequest) -> tuple[CellHandle, str | None]:
        from codemode.client.sessions import SessionClosed, submit_cell

        client = await self.get_client()
        queue = self.core.queue()
        closed: str | None = None
        generation = self._generations.get(base, 1)
        for _ in range(MAX_GENERATIONS):
            name = replacement_name(base, generation)
            try:
                cell = await submit_cell(
                    client, name, request, idle_timeout=self.session_idle_timeout, task_queue=queue
                )
            except SessionClosed as err:
                closed = str(err)
                generation += 1
                continue
            if generation > 1:
                self._generations[base] = generation
            # A successor's first cell starts from nothing: unless asked to, the model must know.
            fresh = closed is not None and cell.index == 1 and not request.restart
            return cell, replaced_notice(_closed_reason(closed)) if fresh else None
        raise SessionClosed(f"sessions {base!r} to {replacement_name(base, generation)!r} are all closed")

    async def _run_from_client(self, code: str) -> RunCodeReturn | ToolReturn:
        from codemode.client.executions import start_execution
        from codemode.client.following import wait_for_outcome

        client = await self.get_client()
        handle = await start_execution(client, self.request(code), task_queue=self.core.queue())
        got = await wait_for_outcome(handle, until_parked=not self.wait_for_approval)
        if isinstance(got, ExecutionStatus):
            raise CallDeferred(
                metadata={
                    "execution_id": handle.id,
                    "pending_approvals": [p.model_dump(mode="json") for p in got.pending_approvals],
                    "decide": decide_all_hint(handle.id),
                }
            )
        return await with_images(client, got, run_code_return(got))

    # -- the application's side: clients, decisions, deferred results ---------------------------

    async def get_client(self) -> Client:
        """The client given, else ``codemode.connect()`` (Temporal's profile and ``TEMPORAL_*`` variables; made once)."""
        if self.client is None:
            self.client = await self.core.get_client()
        return self.client

    async def close_session(self, conversation_id: str) -> None:
        """Close the session of a conversation that is over (outside a workflow): its state
        is deleted now instead of after ``session_idle_timeout``. A later call of that
        conversation would start a new session (and the model would be told)."""
        from codemode.client.sessions import SessionNotFound, close_session

        base = conversation_session_name(self.name, conversation_id)
        try:
            await close_session(await self.get_client(), replacement_name(base, self._generations.get(base, 1)))
        except SessionNotFound:  # it never ran code
            pass

    async def decide(
        self,
        execution_id: str,
        call_id: str,
        *,
        approve: bool,
        by: str,
        comment: str | None = None,
        arguments: dict[str, Any] | None = None,
        answer: Any = _NO_ANSWER,
        key_file: str | None = None,
    ) -> ApprovalRecord | None:
        """A person's decision on a call waiting for approval (``by`` names them): approve,
        approve with ``arguments`` changed (checked against the tool's parameters), deny with a
        ``comment``, or give ``answer`` as the call's result instead of running the tool.
        Returns the recorded decision, or None when no worker runs (recorded as a signal,
        applied later); raises ``codemode.client.following.DecisionRefused`` when that
        call is not waiting or the edit or answer does not fit the tool.

        Signed with ``by``'s key when there is one: ``key_file``, ``CODEMODE_APPROVER_KEY`` (when
        ``CODEMODE_APPROVER`` is ``by``), or the one ``codemode keygen --approver NAME`` made. A
        worker with an approvers file needs it: without a key this raises
        ``codemode.client.signing.SigningKeyMissing`` saying what to set up."""
        from codemode.client.following import send_decision
        from codemode.client.signing import door_signer, sign_pending
        from codemode.workflows.models import Answer, Decision

        if not by or not by.strip():
            raise ValueError("say who decides: by must name a person")
        handle = (await self.get_client()).get_workflow_handle(execution_id)
        signer = await door_signer(handle, by, key_file, door="this pydantic-ai application")
        answered = answer is not _NO_ANSWER
        kind = "answer" if answered else "approve" if approve else "deny"
        signature = await sign_pending(
            handle,
            call_id,
            signer,
            kind,
            edited_arguments=arguments,
            answer=answer if answered else None,
            answered=answered,
        )
        decision = Decision(
            call_id=call_id,
            approve=approve,
            by=by,
            comment=comment,
            arguments=arguments,
            answer=Answer(value=answer) if answered else None,
            door="pydantic-ai",
            signature=signature,
        )
        return await send_decision(handle, decision)

    async def deferred_results(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """Wait until the executions behind this tool's deferred calls have finished, and give
        the results to resume the agent with: ``agent.run(message_history=...,
        deferred_tool_results=...)``. Works from any process, days later."""
        from codemode.client.sessions import CellHandle

        client = await self.get_client()
        results: dict[str, Any] = {}
        for call in requests.calls:
            if call.tool_name != self.name:
                continue
            meta = requests.metadata.get(call.tool_call_id) or {}
            execution_id = meta.get("execution_id")
            if not execution_id:
                raise ValueError(f"deferred call {call.tool_call_id} carries no execution_id: not one of {self.name}'s")
            session, index = meta.get("session"), meta.get("cell")
            if session and index:  # a cell: it may still wait its turn behind the one a person decided
                ticket = CellTicket(session=session, index=index, execution_id=execution_id, ahead=1)
                outcome = await CellHandle(client, ticket).result()
            else:
                outcome = await client.get_workflow_handle(execution_id, result_type=ExecutionOutcome).result()
            results[call.tool_call_id] = run_code_return(outcome, retry=False, session=session, cell=index)
        return DeferredToolResults(calls=results)


@dataclass
class _Turn:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def _closed_reason(message: str | None) -> str:
    """``idle for 24h`` out of a SessionClosed message (else the message)."""
    text = message or "closed"
    if "(" in text and ")" in text:
        return text[text.index("(") + 1 : text.rindex(")")]
    return text
