"""Sessions from your own workflow: cells that share a namespace, run by a session that is
your workflow's child.

An agent's workflow (or any workflow of yours) that runs LLM-written code in steps sends each
step as a cell; a later cell sees the variables, functions and imports an earlier one left::

    from codemode.workflows.child_session import run_session_cell

    cell = await run_session_cell("analysis", CodeExecutionRequest(code=code), request_id=f"step-{n}")
    cell.outcome  # the cell's ExecutionOutcome (code errors in-band, like any execution)

Workflow code cannot send Updates (how clients send cells, ``client/sessions.py``), so:

* the first cell starts the session (``CodeSessionWorkflow``, id ``session:NAME``) as a child
  of the calling workflow: the UI links them, and the session ends with your workflow (its
  parent-close policy cancels it, and a cancelled session closes and deletes its state);
* each cell goes to the session by the signal ``enqueue`` with ``request_id``, your
  deterministic id for the cell (sent twice, it still runs once);
* the session answers by the signal ``codemode_cell_reply`` when the cell ends; this module
  receives it with a handler it registers on your workflow (``workflow.set_signal_handler``),
  which also holds what it knows of your workflow's sessions. Your workflow waits for the
  answer with nothing live: a cell parked on a person's approval for days holds no activity
  and no process, and a replayed workflow finds the answer in its history.

A session that closed under your workflow (its idle timeout, or closed by a person) is replaced
by a new one (``NAME.2``, then ``NAME.3``...): that cell starts from a fresh namespace, and
``SessionCell.replaced`` says why. The worker needs ``CodeModePlugin`` (it runs the session and
the cells); the session runs on your workflow's task queue unless ``task_queue`` says otherwise.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError

from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome, check_session_name
from codemode.workflows.session_models import (
    CELL_REPLY_SIGNAL,
    DEFAULT_IDLE_TIMEOUT,
    ENQUEUE_SIGNAL,
    SESSION_WORKFLOW_TYPE,
    CellReply,
    SessionStart,
    SessionSummary,
    WorkflowCell,
    replacement_name,
    session_workflow_id,
)

__all__ = ("SessionCell", "run_session_cell")

#: Sessions a workflow tries in a row when the names it would take are held by others.
MAX_GENERATIONS = 100


@dataclass
class SessionCell:
    """A cell that ran: which session, its number there, and its outcome."""

    session: str
    index: int
    execution_id: str
    outcome: ExecutionOutcome
    #: Set on the first cell of a session that replaced one that had closed: why it closed
    #: (the cell ran in a fresh namespace).
    replaced: str | None = None


async def run_session_cell(
    name: str,
    request: CodeExecutionRequest,
    *,
    request_id: str,
    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT,
    task_queue: str | None = None,
) -> SessionCell:
    """Run ``request`` as the next cell of this workflow's session ``name`` (started as this
    workflow's child by its first cell, with ``idle_timeout``) and return its outcome.
    ``request.restart`` clears the namespace first. A cell whose execution failed or was
    cancelled raises a non-retryable ``ApplicationError`` (as a failed child execution would)."""
    check_session_name(replacement_name(name, MAX_GENERATIONS))
    sessions = _sessions()
    replaced: str | None = None
    for _ in range(2):  # a session that closed under us is replaced, once
        session = await sessions.start_or_reuse(name, request.runtime, idle_timeout, task_queue)
        replaced = replaced or session.replaced
        cell = WorkflowCell(
            # (as data: a caller outside the workflow sandbox may hold the model's other copy)
            request=CodeExecutionRequest.model_validate(request.model_dump() | {"session": session.name, "cell": None}),
            request_id=request_id,
            reply_to=workflow.info().workflow_id,
        )
        try:
            await workflow.get_external_workflow_handle(session_workflow_id(session.name)).signal(ENQUEUE_SIGNAL, cell)
        except FailureError as err:  # it has just closed
            session.closed = session.closed or f"closed ({err})"
            continue
        await workflow.wait_condition(
            lambda session=session: request_id in sessions.replies or session.closed is not None
        )
        reply = sessions.replies.pop(request_id, None)
        if reply is None:
            raise ApplicationError(
                f"session {session.name!r} ended without answering cell request {request_id}: {session.closed}",
                type="SessionClosed",
                non_retryable=True,
            )
        if reply.outcome is not None and reply.index is not None and reply.execution_id is not None:
            return SessionCell(
                session=reply.session,
                index=reply.index,
                execution_id=reply.execution_id,
                outcome=reply.outcome,
                replaced=replaced if reply.index == 1 else None,
            )
        error = reply.error
        if error is not None and error.type == "SessionClosed":  # closed before the cell ran
            session.closed = session.closed or error.message
            continue
        what = f"cell {reply.index} ({reply.execution_id})" if reply.index else f"cell request {request_id}"
        raise ApplicationError(
            f"{what} of session {reply.session!r} {reply.state}: {error.message if error else 'no outcome'}",
            type=error.type if error else "SessionCellFailed",
            non_retryable=True,
        )
    raise ApplicationError(f"session {name!r} kept closing: the cell did not run", type="SessionClosed")


@dataclass
class _Session:
    name: str
    generation: int
    #: Why the session before it (of the same name) closed, when it replaced one.
    replaced: str | None = None
    #: Why it closed, once it did.
    closed: str | None = None


class _Sessions:
    """This workflow's sessions and their answers: the state behind the reply signal's handler
    (one per workflow run, rebuilt by replay like anything else in workflow code)."""

    def __init__(self) -> None:
        self.replies: dict[str, CellReply] = {}
        self.current: dict[str, _Session] = {}
        self._opening = asyncio.Lock()
        #: Tasks that note when a session closes.
        self._watchers: list[asyncio.Task[None]] = []

    def receive(self, reply: CellReply) -> None:
        self.replies[reply.request_id] = reply

    async def start_or_reuse(
        self, name: str, runtime: str, idle_timeout: timedelta, task_queue: str | None
    ) -> _Session:
        async with self._opening:  # two cells sent at once start one session
            current = self.current.get(name)
            if current is not None and current.closed is None:
                return current
            generation = current.generation + 1 if current is not None else 1
            for _ in range(MAX_GENERATIONS):
                session_name = replacement_name(name, generation)
                try:
                    handle = await workflow.start_child_workflow(
                        SESSION_WORKFLOW_TYPE,
                        SessionStart(name=session_name, runtime=runtime, idle_timeout=idle_timeout),
                        id=session_workflow_id(session_name),
                        task_queue=task_queue,
                        result_type=SessionSummary,
                        # A closed session's name is not reused: its successor takes the next.
                        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                        parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                        static_summary=f"session {session_name} ({runtime})",
                    )
                except WorkflowAlreadyStartedError:
                    generation += 1
                    continue
                session = _Session(
                    name=session_name, generation=generation, replaced=current.closed if current else None
                )
                self.current[name] = session
                self._watchers.append(asyncio.create_task(_watch(session, handle)))
                return session
            raise ApplicationError(
                f"no free session name after {name!r} ({MAX_GENERATIONS} tried)",
                type="SessionClosed",
                non_retryable=True,
            )


async def _watch(session: _Session, handle: workflow.ChildWorkflowHandle[object, SessionSummary]) -> None:
    try:
        summary = await handle
        session.closed = summary.closed_reason
    except FailureError as err:
        session.closed = f"ended: {err}"


def _sessions() -> _Sessions:
    """This workflow's ``_Sessions``: the owner of the reply signal's handler, registered by
    the first cell."""
    handler = workflow.get_signal_handler(CELL_REPLY_SIGNAL)
    owner = getattr(handler, "__self__", None)
    if isinstance(owner, _Sessions):
        return owner
    if handler is not None:
        raise ApplicationError(
            f"the workflow already handles the signal {CELL_REPLY_SIGNAL!r}: sessions need it", non_retryable=True
        )
    sessions = _Sessions()
    workflow.set_signal_handler(CELL_REPLY_SIGNAL, sessions.receive)
    return sessions
