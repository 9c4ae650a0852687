"""What ``execute`` and ``result`` do: start a run, follow it to its outcome while reporting
each tool call as MCP progress, put calls that need approval to the person, and answer one
``ExecutionReport``, or the questions (``InputRequiredResult``) on 2026-07-28 connections."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context
from mcp_types import InputRequiredResult
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError
from temporalio.service import RPCError, RPCStatusCode

from codemode.apps.mcp import approvals, reports
from codemode.apps.mcp.backend import BackendSlot, BackendUnavailable
from codemode.apps.mcp.catalog import MAX_CODE_CHARS
from codemode.apps.mcp.reports import ExecutionReport
from codemode.client import display
from codemode.client.backend import Backend, has_workers
from codemode.client.call_progress import ended_calls
from codemode.client.executions import start_execution
from codemode.client.following import (
    PARKED_POLL_MAX_SECONDS,
    POLL_SECONDS,
    cancel_reason,
    closed_word,
    parked,
    query_status,
    quietly,
)
from codemode.client.histories.audit import fetch_audit
from codemode.client.sessions import SessionError, describe_session, submit_cell
from codemode.runtimes import RUNTIMES
from codemode.worker.connection import server_answers
from codemode.workflows.models import (
    WORKFLOW_TYPE,
    CodeExecutionRequest,
    ExecutionOutcome,
    ExecutionStatus,
    InvalidSessionName,
    PendingApproval,
    ToolCallRecord,
    check_session_name,
)
from codemode.workflows.session_models import parse_cell_execution_id

log = logging.getLogger(__name__)
#: How long Temporal may not answer before a call gives up on it (the run itself is safe).
SERVER_GONE_SECONDS = 5.0


class BadInput(ValueError):
    """Input refused before anything starts (the tool answers it as a tool error)."""


class TemporalUnavailable(RuntimeError):
    """Temporal stopped answering while a call followed an execution."""

    def __init__(self, address: str, execution_id: str | None) -> None:
        self.execution_id = execution_id
        if execution_id is None:
            text = f"Temporal at {address} does not answer: nothing was started; try again when it is back."
        else:
            text = (
                f"Temporal at {address} stopped answering while execution {execution_id} was in progress. "
                f"The execution is saved and continues when the server is back: "
                f"call result(execution_id='{execution_id}') then."
            )
        super().__init__(text)


@dataclass
class Progress:
    """Each tool call as MCP progress (a no-op when the client sent no progress token), once
    per call and state, from whichever source sees it first: the history as the run goes on,
    or the outcome at the end."""

    ctx: Context[Any, Any]
    shown: dict[str, str] = field(default_factory=dict)
    count: int = 0
    #: Held while a notification is sent: a follower is stopped between two, never during one.
    sending: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def calls(self, calls: list[ToolCallRecord]) -> None:
        async with self.sending:
            for call in calls:
                showable = call.status in display.FINAL_CALL_STATES or call.status == "awaiting_approval"
                if showable and self.shown.get(call.call_id) != call.status:
                    self.shown[call.call_id] = call.status
                    self.count += 1
                    try:
                        await self.ctx.report_progress(self.count, None, display.call_line(call))
                    except Exception as err:  # noqa: BLE001 (the client went away: the run goes on regardless)
                        log.debug("progress not delivered: %s", err)

    async def stop(self, follower: asyncio.Future[Any]) -> None:
        """Stop a task that reports through this one. Cancelled in the middle of a send, a call
        counted as shown would never reach the client (the outcome's pass skips it): seen in
        CI, the third of four calls missing when the run ended as its notification went out."""
        if follower.done():
            return
        try:
            async with self.sending:
                follower.cancel()
        except asyncio.CancelledError:  # (this request cancelled meanwhile: stop it regardless)
            follower.cancel()
            raise


@dataclass
class Parked:
    """The run waits for a person on these calls."""

    pending: list[PendingApproval]


@dataclass
class Executions:
    """Runs code for the tools of one MCP server."""

    slot: BackendSlot
    runtime: str = "monty"
    #: How long a person has to answer a question (connections that wait for the answer).
    approval_wait: float = 60.0
    #: How long one call follows a run before it answers ``running`` (and ``result`` takes over).
    max_wait: float = 300.0
    #: The saved snippets this server lists, name -> version: what the code's ``snippets.NAME``
    #: runs (the versions the model was shown, pinned in every request).
    snippets: dict[str, str] = field(default_factory=dict)

    @property
    def backend(self) -> Backend:
        backend = self.slot.ready
        if backend is None:  # every entry point awaits _connected() first
            raise RuntimeError("the backend is not up yet")
        return backend

    @property
    def ui_url(self) -> str | None:
        backend = self.slot.ready
        return backend.ui_url if backend is not None else None

    async def _connected(self) -> Backend:
        try:
            return await self.slot.get()
        except BackendUnavailable as err:
            raise BadInput(f"Temporal is not available to this server: {err}") from None

    # -- execute ---------------------------------------------------------------------------

    def request_for(
        self,
        code: str,
        runtime: str | None,
        session: str | None = None,
        restart: bool = False,
        snippets: dict[str, str] | None = None,
    ) -> CodeExecutionRequest:
        """The request for one ``execute`` call: a cell of ``session`` when one is named
        (``client/sessions.py``: the code sees what earlier cells left; ``restart`` clears it)."""
        if len(code) > MAX_CODE_CHARS:
            raise BadInput(
                f"the code is {len(code):,} characters, over the {MAX_CODE_CHARS:,} limit; nothing was started"
            )
        runtime = runtime or self.runtime
        if runtime not in RUNTIMES:
            raise BadInput(f"unknown runtime {runtime!r}; known: {', '.join(sorted(RUNTIMES))}")
        if session is None:
            if restart:
                raise BadInput("restart applies to a session: name one with session=...")
            return CodeExecutionRequest(code=code, runtime=runtime, snippets={**self.snippets, **(snippets or {})})
        try:
            check_session_name(session)
        except InvalidSessionName as err:
            raise BadInput(str(err)) from None
        return CodeExecutionRequest(code=code, runtime=runtime, session=session, restart=restart)

    async def execute(
        self,
        ctx: Context[Any, Any],
        code: str,
        runtime: str | None,
        session: str | None = None,
        restart: bool = False,
        snippets: dict[str, str] | None = None,
    ) -> ExecutionReport | InputRequiredResult:
        retry = approvals.retry_of(ctx)
        if retry is not None:  # the same call again, with the person's answers (2026-07-28)
            await self._connected()
            return await self._answered(ctx, retry, self.max_wait)
        request = self.request_for(code, runtime, session, restart, snippets)  # bad input starts nothing
        await self._connected()
        if request.session is not None:
            return await self._execute_cell(ctx, request)
        try:
            handle = await start_execution(
                self.backend.client,
                request,
                task_queue=self.backend.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except RPCError as err:
            if err.status == RPCStatusCode.UNAVAILABLE or not await self._server_answers():
                raise TemporalUnavailable(self.backend.address, None) from None
            raise
        return await self.follow(ctx, handle, wait_seconds=self.max_wait, ask=True)

    async def _execute_cell(
        self, ctx: Context[Any, Any], request: CodeExecutionRequest
    ) -> ExecutionReport | InputRequiredResult:
        """Send the code to its session and follow the cell once its turn comes; a cell still
        waiting behind another one when the wait is over answers ``queued``."""
        assert request.session is not None
        deadline = time.monotonic() + self.max_wait
        try:
            cell = await submit_cell(self.backend.client, request.session, request, task_queue=self.backend.task_queue)
        except SessionError as err:
            raise BadInput(str(err)) from None
        except RPCError as err:
            if err.status == RPCStatusCode.UNAVAILABLE or not await self._server_answers():
                raise TemporalUnavailable(self.backend.address, None) from None
            raise
        try:
            handle = await asyncio.wait_for(cell.started(), timeout=max(0.0, deadline - time.monotonic()))
        except TimeoutError:
            return await self._queued(cell.session, cell.index, cell.execution_id)
        except SessionError as err:  # the session closed before the cell's turn
            raise BadInput(str(err)) from None
        return await self.follow(ctx, handle, wait_seconds=max(0.0, deadline - time.monotonic()), ask=True)

    async def _queued(self, session: str, index: int, execution_id: str) -> ExecutionReport:
        """A cell waiting for its turn: what it waits for, and how to get its outcome later."""
        status = await describe_session(self.backend.client, session)
        record = next((c for c in status.queued if c.index == index), None)
        why = record.waiting_for if record is not None and record.waiting_for else "the cells before it"
        return ExecutionReport(
            status="queued",
            execution_id=execution_id,
            stdout=f"cell {index} of session {session} waits for its turn ({why}); call result({execution_id!r}) later",
        )

    # -- result ----------------------------------------------------------------------------

    async def result(
        self, ctx: Context[Any, Any], execution_id: str, wait_seconds: float
    ) -> ExecutionReport | InputRequiredResult:
        wait = max(0.0, min(float(wait_seconds), self.max_wait))
        await self._connected()
        retry = approvals.retry_of(ctx)
        if retry is not None:
            return await self._answered(ctx, retry, wait)
        handle = self.backend.client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)
        try:
            desc = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                queued = await self._queued_cell(execution_id)
                if queued is not None:
                    return queued
                raise BadInput(f"no execution {execution_id!r}") from None
            if not await self._server_answers():
                raise TemporalUnavailable(self.backend.address, execution_id) from None
            raise
        if desc.workflow_type != WORKFLOW_TYPE:
            raise BadInput(f"{execution_id!r} is not a code execution (it is a {desc.workflow_type})")
        if desc.status != WorkflowExecutionStatus.RUNNING:
            return await self._final(handle)
        return await self.follow(ctx, handle, wait_seconds=wait, ask=wait > 0)

    async def rollback(
        self, ctx: Context[Any, Any], execution_id: str, reason: str | None, wait_seconds: float
    ) -> ExecutionReport | InputRequiredResult:
        """Ask for the rollback of an execution (``client/undo.py``) and follow it like a run: a
        compensation that needs a person is put to the person, never decided here."""
        from codemode.client.undo import RollbackRefused, start_rollback

        wait = max(0.0, min(float(wait_seconds), self.max_wait))
        await self._connected()
        try:
            handle = await start_rollback(self.backend.client, execution_id, reason=reason, door="mcp")
        except RollbackRefused as err:
            raise BadInput(str(err)) from None
        return await self.follow(ctx, handle, wait_seconds=wait, ask=wait > 0)

    async def _queued_cell(self, execution_id: str) -> ExecutionReport | None:
        """A session's cell that has no execution yet because it waits for its turn."""
        parsed = parse_cell_execution_id(execution_id)
        if parsed is None:
            return None
        session, index = parsed
        try:
            status = await describe_session(self.backend.client, session)
        except SessionError:
            return None
        if any(c.index == index for c in status.queued):
            return await self._queued(session, index, execution_id)
        return None

    # -- following a run -------------------------------------------------------------------

    async def follow(
        self,
        ctx: Context[Any, Any],
        handle: WorkflowHandle[Any, ExecutionOutcome],
        *,
        wait_seconds: float,
        ask: bool,
        answered: set[str] | None = None,
    ) -> ExecutionReport | InputRequiredResult:
        """Follow the run up to ``wait_seconds``; when it parks, ask the person (if ``ask``
        and the client can), apply the answers, and go on. ``answered``: calls decided here
        already (a decision sent as a signal shows as pending until a worker applies it)."""
        deadline = time.monotonic() + wait_seconds
        progress = Progress(ctx)
        answered = set(answered or ())
        while True:
            got = await self._watch(handle, progress, deadline, answered)
            if isinstance(got, ExecutionReport):
                return got
            if got is None:  # the wait is over
                return await self._snapshot(handle)
            if not ask or not approvals.can_elicit(ctx):
                return await self._snapshot(handle)
            if (unsigned := await approvals.cannot_sign(handle, got.pending)) is not None:
                return (await self._snapshot(handle)).model_copy(update={"note": unsigned})
            if approvals.asks_by_input_required(ctx):
                return approvals.input_required(handle.id, got.pending, self.backend.flags())
            for p in got.pending:
                remaining = deadline - time.monotonic()
                wait = max(0.0, min(self.approval_wait, remaining))
                answer = await approvals.ask(ctx, handle.id, p, wait, self.backend.flags())
                if answer is None:
                    return await self._snapshot(handle)
                await self._apply(handle, p.call_id, answer, approvals.decider(ctx))
                answered.add(p.call_id)

    async def _answered(
        self, ctx: Context[Any, Any], retry: approvals.Retry, wait_seconds: float
    ) -> ExecutionReport | InputRequiredResult:
        """A retry carrying the person's answers: apply them, then follow the run again."""
        handle = self.backend.client.get_workflow_handle(retry.execution_id, result_type=ExecutionOutcome)
        by = approvals.decider(ctx)
        for call_id, answer in retry.answers.items():
            if answer is not None:
                await self._apply(handle, call_id, answer, by)
        if any(answer is None for answer in retry.answers.values()):
            return await self._snapshot(handle)
        return await self.follow(ctx, handle, wait_seconds=wait_seconds, ask=True, answered=set(retry.answers))

    async def _apply(self, handle: WorkflowHandle[Any, Any], call_id: str, answer: approvals.Answer, by: str) -> None:
        try:
            worker_up = await has_workers(self.backend.client, self.backend.task_queue)
            await approvals.apply(handle, call_id, answer, by, worker_up=worker_up)
        except RPCError:
            if not await self._server_answers():
                raise TemporalUnavailable(self.backend.address, handle.id) from None
            raise

    async def _watch(
        self,
        handle: WorkflowHandle[Any, ExecutionOutcome],
        progress: Progress,
        deadline: float,
        answered: set[str],
    ) -> ExecutionReport | Parked | None:
        """The report once the run ends, ``Parked`` when it waits for a person on calls not
        answered here, None when the deadline passes first.

        No worker is asked while the run goes on (issue 28): each call's progress comes from
        the history as the server records it (``ended_calls``), and whether the run waits for
        a person from its memo, which the server answers. Only a run the memo says is parked
        is asked for its status (the calls it waits on): a parked run is not about to end, so
        that query does not race the run's end (the SDK core logs such a race on the worker)."""
        result = asyncio.ensure_future(handle.result())
        calls = asyncio.ensure_future(self._show_calls(handle, progress))
        looking: asyncio.Future[Any] | None = None
        wait, gone_since = POLL_SECONDS, None
        try:
            while True:
                remaining = deadline - time.monotonic()
                done, _ = await asyncio.wait({result}, timeout=max(0.0, min(wait, remaining)))
                if done:
                    break
                if gone_since is not None:  # Temporal stopped answering: probe its port, not its API
                    if await self._server_answers():
                        gone_since = None
                    elif time.monotonic() - gone_since <= SERVER_GONE_SECONDS and remaining > 0:
                        continue
                    else:
                        raise TemporalUnavailable(self.backend.address, handle.id)
                # Look while still waiting for the result: an outcome that arrives meanwhile is
                # answered at once, not after the look's round trip.
                looking = asyncio.ensure_future(parked(handle))
                done, _ = await asyncio.wait({result, looking}, return_when=asyncio.FIRST_COMPLETED)
                if result in done:
                    break
                waits = await looking
                wait = min(wait * 2, PARKED_POLL_MAX_SECONDS)
                if waits is None:  # no server
                    if not await self._server_answers():
                        gone_since = time.monotonic()
                elif waits:
                    status = await query_status(handle)
                    if status is not None:
                        await progress.calls(status.tool_calls)
                        waiting = [p for p in status.pending_approvals if p.call_id not in answered]
                        if waiting and status.state == "awaiting_approval":
                            return Parked(waiting)
                if remaining <= 0:
                    return None
            try:
                outcome = result.result()
            except WorkflowFailureError as err:
                return await self._closed(handle, err)
            except RPCError:
                if not await self._server_answers():
                    raise TemporalUnavailable(self.backend.address, handle.id) from None
                raise
        finally:
            if not result.done():
                result.cancel()
            await progress.stop(calls)
            if looking is not None and not looking.done():
                # Left to finish (milliseconds): the server logs a cancelled request as a failure.
                looking.add_done_callback(quietly)
        await progress.calls(outcome.tool_calls)
        return reports.completed(outcome)

    async def _show_calls(self, handle: WorkflowHandle[Any, ExecutionOutcome], progress: Progress) -> None:
        """Each call as MCP progress when it ends, until the run closes (or this is cancelled)."""
        try:
            async for item in ended_calls(self.backend.client, handle.id, handle.run_id):
                if not isinstance(item, str):  # (what the code printed is in the report)
                    await progress.calls([item])
        except asyncio.CancelledError:
            pass
        except Exception as err:  # noqa: BLE001 - progress is a courtesy: the outcome lists every call
            log.debug("following the calls of %s stopped: %s", handle.id, err)

    async def _closed(self, handle: WorkflowHandle[Any, Any], err: WorkflowFailureError) -> ExecutionReport:
        """A run that ended without an outcome: cancelled, timed out or terminated."""
        if isinstance(err.cause, CancelledError):
            reason = await cancel_reason(handle)
            return reports.closed(handle.id, "cancelled", f"cancelled{': ' + reason if reason else ''}")
        desc = await handle.describe()
        word = closed_word(desc.status)
        status = word if word in ("cancelled", "timed_out") else "failed"
        if desc.status == WorkflowExecutionStatus.TERMINATED:
            return reports.closed(handle.id, "failed", f"terminated: {err.cause or err}")
        return reports.closed(handle.id, status, str(err.cause or err))  # type: ignore[arg-type]

    async def _final(self, handle: WorkflowHandle[Any, ExecutionOutcome]) -> ExecutionReport:
        """The report of a run that has ended."""
        try:
            return reports.completed(await handle.result())
        except WorkflowFailureError as err:
            return await self._closed(handle, err)

    async def _snapshot(self, handle: WorkflowHandle[Any, ExecutionOutcome]) -> ExecutionReport:
        """Where a run stands now: its status query, or its history when no worker answers."""
        flag = self.backend.flags()
        status: ExecutionStatus | None = await query_status(handle)
        if status is not None:
            if status.state not in ("running", "awaiting_approval", "rolling_back"):  # it ended meanwhile
                return await self._final(handle)
            report = reports.pending(
                handle.id,
                status.pending_approvals,
                status.tool_calls,
                status.stdout,
                status="awaiting_approval"
                if status.pending_approvals
                else "rolling_back"
                if status.state == "rolling_back"
                else "running",
                address_flag=flag,
            )
            report.undo = status.undo
            return report
        try:
            audit = await fetch_audit(self.backend.client, handle.id)
        except RPCError:
            if not await self._server_answers():
                raise TemporalUnavailable(self.backend.address, handle.id) from None
            raise
        if audit.status != "running":
            return await self._final(handle)
        waiting = audit.pending_approvals()
        calls = [
            ToolCallRecord(
                call_id=c.call_id,
                tool=c.tool,
                args=c.args,
                kwargs=c.kwargs,
                status=c.status,
                result=c.result,
                error=c.error,
                attempts=c.attempts,
                summary=c.summary,
            )
            for c in audit.calls
        ]
        return reports.pending(
            handle.id,
            waiting,
            calls,
            audit.stdout,
            status="awaiting_approval" if waiting else "running",
            address_flag=flag,
        )

    async def _server_answers(self) -> bool:
        return await asyncio.to_thread(server_answers, self.backend.address)
