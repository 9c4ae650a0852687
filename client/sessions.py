"""Sessions from Python: cells that share a namespace, durably (``workflows/session_workflow.py``).

::

    cell = await submit_cell(client, "analysis", "rows = fetch('sales')\\nlen(rows)")
    outcome = await cell.result()                    # an ExecutionOutcome, like any execution
    outcome = await run_cell(client, "analysis", "sum(r['total'] for r in rows)")
    status = await describe_session(client, "analysis")   # cells, variables and their types
    await close_session(client, "analysis")

The first cell creates the session (update-with-start: atomic, whoever comes first); later
cells must use the same runtime. ``CodeExecutionRequest(session=...)`` does the same through
``codemode.client.executions.start_execution``. Errors are typed: ``InvalidSessionName``,
``SessionClosed``, ``RuntimeMismatch``, ``SessionBusy``, ``SessionNotFound``,
``SessionUnsupported``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from codemode.client.following import query_status
from codemode.client.requests import check_request_size, search_attributes_registered, starter
from codemode.workflows.models import (
    SESSION_NAME,
    TASK_QUEUE,
    CodeExecutionRequest,
    ExecutionOutcome,
    ExecutionStatus,
    InvalidSessionName,
    check_session_name,
)
from codemode.workflows.session_models import (
    DEFAULT_IDLE_TIMEOUT,
    SESSION_PREFIX,
    SESSION_WORKFLOW_TYPE,
    CellRecord,
    CellSubmission,
    CellTicket,
    SessionStart,
    SessionStatus,
    SessionSummary,
    cell_execution_id,
    parse_cell_execution_id,
    session_workflow_id,
)

__all__ = [
    "CellHandle",
    "InvalidSessionName",
    "RuntimeMismatch",
    "SessionBusy",
    "SessionClosed",
    "SessionError",
    "SessionNotFound",
    "SessionUnsupported",
    "close_session",
    "describe_session",
    "list_sessions",
    "run_cell",
    "running_cell",
    "session_named",
    "submit_cell",
]


class SessionError(Exception):
    """A session refused a request; the message says why and what to do."""


class SessionClosed(SessionError):
    """The session is closed (idle too long, or closed on request): cells are refused."""


class RuntimeMismatch(SessionError):
    """The cell asks for another runtime than its session runs on."""


class SessionBusy(SessionError):
    """Too many cells are waiting in the session already."""


class SessionNotFound(SessionError):
    """No session by that name."""


class SessionUnsupported(SessionError):
    """The cell asks for something sessions cannot do (``network="ratchet"``)."""


class NoWorkerAnswered(SessionError):
    """No worker answered the session's query in time (none runs, or one is starting)."""


_REFUSALS: dict[str, type[SessionError]] = {
    "SessionClosed": SessionClosed,
    "RuntimeMismatch": RuntimeMismatch,
    "SessionBusy": SessionBusy,
    "SessionUnsupported": SessionUnsupported,
}

#: How often a queued cell's handle asks its session whether it started (backing off to 1 s).
POLL_START = 0.05
#: How long a describe waits for a worker to answer.
QUERY_TIMEOUT = timedelta(seconds=10)


@dataclass
class CellHandle:
    """A cell sent to a session: its number, its execution id, and a way to wait for it."""

    client: Client
    ticket: CellTicket
    #: Set by ``started_unless_held``: the execution the cell waits behind (parked on an approval).
    held_by: str | None = None

    @property
    def session(self) -> str:
        return self.ticket.session

    @property
    def index(self) -> int:
        return self.ticket.index

    @property
    def execution_id(self) -> str:
        return self.ticket.execution_id

    async def started(self) -> WorkflowHandle[Any, ExecutionOutcome]:
        """The cell's execution, once its turn came (its status, approvals and audit are
        an execution's like any other). Raises ``SessionClosed`` if it never will run."""
        handle = await self._started(unless_held=False)
        assert handle is not None
        return handle

    async def started_unless_held(self) -> WorkflowHandle[Any, ExecutionOutcome] | None:
        """Like ``started``, but while the cell waits behind a cell that waits for a person's
        decision, returns None at once (``held_by`` names that cell's execution) instead of
        waiting for the person."""
        return await self._started(unless_held=True)

    async def _started(self, *, unless_held: bool) -> WorkflowHandle[Any, ExecutionOutcome] | None:
        handle = self.client.get_workflow_handle(self.execution_id, result_type=ExecutionOutcome)
        if self.ticket.ahead == 0 and await _appears(handle):
            return handle
        delay = POLL_START
        while True:
            try:
                status = await describe_session(self.client, self.session)
            except NoWorkerAnswered:  # (its worker may be restarting): ask again
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            record = _find_cell(status, self.index)
            if record is not None and record.state == "dropped":
                raise SessionClosed(f"session {self.session!r} closed before cell {self.index} ran")
            if record is not None and record.state in ("queued", "starting"):
                if unless_held and status.running is not None and await _parked(self.client, status.running):
                    self.held_by = status.running.execution_id
                    return None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            # Running or ended (or long gone from the session's recent list): it exists.
            if await _appears(handle, within=10.0):
                return handle
            raise SessionError(f"cell {self.index} of session {self.session!r} has no execution ({record})")

    async def result(self) -> ExecutionOutcome:
        """The cell's outcome (waits for its turn, then for it)."""
        handle = await self.started()
        return await handle.result()

    async def status(self) -> ExecutionStatus | CellRecord:
        """The execution's status once it runs; before, the session's record of the cell
        (state ``queued`` and what it waits for)."""
        record = await _cell_record(self.client, self.session, self.index)
        if record is not None and record.state in ("queued", "starting", "dropped"):
            return record
        return await self.client.get_workflow_handle(self.execution_id).query("status", result_type=ExecutionStatus)


async def submit_cell(
    client: Client,
    session: str,
    code: str | CodeExecutionRequest,
    *,
    runtime: str | None = None,
    restart: bool = False,
    inputs: dict[str, Any] | None = None,
    tools: list[str] | None = None,
    idle_timeout: timedelta = DEFAULT_IDLE_TIMEOUT,
    task_queue: str = TASK_QUEUE,
) -> CellHandle:
    """Send a cell to ``session`` (created by its first cell, on ``runtime``, default monty).
    Returns once the session accepted it; ``await handle.result()`` for its outcome.
    ``restart``: clear the namespace before this cell. ``idle_timeout`` applies when this
    cell creates the session."""
    check_session_name(session)
    if isinstance(code, CodeExecutionRequest):
        request = code
        if runtime is not None and runtime != request.runtime:
            raise ValueError(f"runtime={runtime!r} but the request says {request.runtime!r}")
    else:
        request = CodeExecutionRequest(code=code, runtime=runtime or "monty", inputs=inputs or {}, tools=tools)
    request = request.model_copy(
        update={
            "session": session,
            "restart": restart or request.restart,
            "cell": None,
            "started_by": request.started_by or starter(),  # four-eyes rules read it
        }
    )
    if request.network == "ratchet":  # (the session would refuse it too, after creating itself)
        raise SessionUnsupported("sessions do not support network='ratchet' yet; use network='none' (the default)")
    check_request_size(request)
    if request.index_search_attributes and not await search_attributes_registered(client):
        request = request.model_copy(update={"index_search_attributes": False})
    start = WithStartWorkflowOperation(
        SESSION_WORKFLOW_TYPE,
        SessionStart(name=session, runtime=request.runtime, idle_timeout=idle_timeout),
        id=session_workflow_id(session),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        # A closed session stays closed: its name is not reused while Temporal keeps it.
        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        result_type=SessionSummary,
        static_summary=f"session {session} ({request.runtime})",
    )
    try:
        try:
            ticket = await client.execute_update_with_start_workflow(
                "submit", CellSubmission(request=request), start_workflow_operation=start, result_type=CellTicket
            )
        finally:
            # The SDK also fails the start operation's own future; read it so asyncio does not
            # log "Future exception was never retrieved" for an error handled below.
            future = start._workflow_handle
            if future.done() and not future.cancelled():
                future.exception()
    except WorkflowUpdateFailedError as err:
        raise _refusal(err) from None
    except WorkflowAlreadyStartedError:
        raise SessionClosed(await _closed_message(client, session)) from None
    except RPCError as err:
        if err.status == RPCStatusCode.ALREADY_EXISTS:
            raise SessionClosed(await _closed_message(client, session)) from None
        raise
    return CellHandle(client, ticket)


async def run_cell(client: Client, session: str, code: str | CodeExecutionRequest, **kwargs: Any) -> ExecutionOutcome:
    """``submit_cell`` and wait for the outcome."""
    return await (await submit_cell(client, session, code, **kwargs)).result()


async def describe_session(client: Client, session: str, *, approvals: bool = False) -> SessionStatus:
    """The session's status: its cells (running, queued, recent), variables and their types,
    where its state is kept, when it closes. Works for a closed session while Temporal
    keeps it (its last status). ``approvals``: also ask the running cell whether it waits for
    a person's decision, and if it does, show it as ``awaiting_approval`` and say on which
    calls (the session itself only knows that the cell runs)."""
    handle = client.get_workflow_handle(session_workflow_id(session))
    try:
        status = await handle.query("describe", result_type=SessionStatus, rpc_timeout=QUERY_TIMEOUT)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFound(f"no session named {session!r}") from None
        if err.status in (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED):
            raise NoWorkerAnswered(
                f"no worker answered for session {session!r}: is a worker running on its task queue?"
            ) from None
        raise
    if approvals and status.running is not None:
        status = status.model_copy(update={"running": await _as_a_person_sees_it(client, status.running)})
    return status


def session_named(execution_id: str) -> str | None:
    """NAME when ``execution_id`` is a session's own workflow id (``session:NAME``, what the UI
    shows as an agent workflow's child), else None (a cell's id is ``session:NAME:N``)."""
    if not execution_id.startswith(SESSION_PREFIX):
        return None
    name = execution_id[len(SESSION_PREFIX) :]
    return name if SESSION_NAME.fullmatch(name) else None


def running_cell(description: WorkflowExecutionDescription) -> str | None:
    """The execution id of the cell a session's workflow runs now (its pending child), from the
    server's description of that workflow (``handle.describe()``: no worker needed); None when
    it runs none, or the description is not a session's."""
    if description.workflow_type != SESSION_WORKFLOW_TYPE:
        return None
    cells = [
        (parsed[1], child.workflow_id)
        for child in description.raw_description.pending_children
        if (parsed := parse_cell_execution_id(child.workflow_id)) is not None
        and session_workflow_id(parsed[0]) == description.id
    ]
    return max(cells)[1] if cells else None


async def close_session(client: Client, session: str, *, reason: str | None = None) -> SessionSummary:
    """Close the session now (the running cell is cancelled, queued ones dropped, its state
    deleted) and wait until it is closed. Closing a closed session returns its summary."""
    handle = client.get_workflow_handle(session_workflow_id(session), result_type=SessionSummary)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise SessionNotFound(f"no session named {session!r}") from None
        raise
    if desc.status == WorkflowExecutionStatus.RUNNING:
        try:
            await handle.execute_update("close", reason, result_type=SessionStatus)
        except WorkflowUpdateFailedError as err:
            raise _refusal(err) from None
    return await handle.result()


@dataclass
class SessionInfo:
    name: str
    status: str
    started_at: Any
    closed_at: Any


async def list_sessions(client: Client, *, include_closed: bool = True, limit: int = 100) -> list[SessionInfo]:
    """Sessions the server knows, newest first."""
    query = f"WorkflowType = '{SESSION_WORKFLOW_TYPE}'"
    if not include_closed:
        query += " AND ExecutionStatus = 'Running'"
    found: list[SessionInfo] = []
    async for wf in client.list_workflows(query, limit=limit):
        name = wf.id.split(":", 1)[1] if ":" in wf.id else wf.id
        status = wf.status.name.lower() if wf.status is not None else "unknown"
        found.append(SessionInfo(name=name, status=status, started_at=wf.start_time, closed_at=wf.close_time))
    return found


async def _appears(handle: WorkflowHandle[Any, Any], within: float = 2.0) -> bool:
    """Whether the execution exists within ``within`` seconds (a cell with nothing before it
    is started by the task that accepted it; the server creates it a moment later)."""
    deadline = asyncio.get_running_loop().time() + within
    delay = 0.002
    while True:
        try:
            await handle.describe()
            return True
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


async def _cell_record(client: Client, session: str, index: int) -> CellRecord | None:
    return _find_cell(await describe_session(client, session), index)


def _find_cell(status: SessionStatus, index: int) -> CellRecord | None:
    for record in [*([status.running] if status.running else []), *status.queued, *status.recent]:
        if record.index == index:
            return record
    return None


async def _as_a_person_sees_it(client: Client, record: CellRecord) -> CellRecord:
    """A running cell parked on a person's decision reads ``awaiting_approval``, with the calls."""
    if record.state != "running":
        return record
    status = await query_status(client.get_workflow_handle(record.execution_id))
    if status is None or status.state != "awaiting_approval" or not status.pending_approvals:
        return record
    calls = "; ".join(f"call {p.call_id}: {p.summary or p.tool}" for p in status.pending_approvals)
    return record.model_copy(update={"state": "awaiting_approval", "waiting_for": f"approval of {calls}"})


async def _parked(client: Client, record: CellRecord) -> bool:
    """Whether the running cell waits for a person's decision."""
    if record.state != "running":
        return False
    status = await query_status(client.get_workflow_handle(record.execution_id))
    return status is not None and status.state == "awaiting_approval"


async def _closed_message(client: Client, session: str) -> str:
    """Why a session that ended is closed, as its summary says (``idle for 24h``)."""
    handle = client.get_workflow_handle(session_workflow_id(session), result_type=SessionSummary)
    why = ""
    try:
        why = f" ({(await asyncio.wait_for(handle.result(), 5)).closed_reason})"
    except (WorkflowFailureError, RPCError, TimeoutError):  # (it did not end as a session ends: terminated)
        pass
    return f"session {session!r} is closed{why}; start a new session under another name"


def _refusal(err: WorkflowUpdateFailedError) -> Exception:
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type in _REFUSALS:
        return _REFUSALS[cause.type](cause.message)
    return err


def cell_id(session: str, index: int) -> str:
    """The execution id of a session's cell (``session:NAME:N``)."""
    return cell_execution_id(session, index)
