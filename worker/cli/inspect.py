"""``codemode status``, ``codemode history`` and ``codemode list``: what an execution is doing
now (the status query, or the history when no worker answers), the audit timeline from its
history, and the executions the server's visibility index knows (by state and runtime)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import get_args

import click
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from codemode.activities.encryption import KEY_ID_METADATA, DecryptionFailed, UnknownEncryptionKey
from codemode.runtimes import RUNTIMES
from codemode.worker import display
from codemode.worker.audit import ExecutionAudit, fetch_audit
from codemode.worker.cli.common import (
    EXIT_OK,
    Fail,
    address_option,
    emit,
    existing_handle,
    json_option,
    note,
    open_client,
    query_status,
)
from codemode.worker.client.connection import has_workers
from codemode.worker.client.executions import unplain
from codemode.worker.client.following import CLOSED_STATES
from codemode.workflows.models import (
    RUNTIME_KEY,
    SA_RUNTIME,
    SA_STATUS,
    STATUS_KEY,
    WORKFLOW_TYPE,
    ApprovalRecord,
    ExecutionState,
    ExecutionStatus,
    ToolCallRecord,
)

_MODEL_STATES = frozenset(get_args(ExecutionState))


def settle(status: ExecutionStatus, closed_as: WorkflowExecutionStatus | None) -> ExecutionStatus:
    """Temporal's close status wins over the workflow's last word: a run cancelled while parked
    is not awaiting approval any more. (A word the status model does not know yet reads failed.)"""
    if closed_as not in CLOSED_STATES:
        return status
    word = CLOSED_STATES[closed_as]
    return status.model_copy(update={"state": word if word in _MODEL_STATES else "failed", "pending_approvals": []})


def status_from_audit(audit: ExecutionAudit) -> ExecutionStatus:
    """The status as the history shows it, for when no worker can answer the query."""
    pending = audit.pending_approvals()
    if audit.status == "running":
        state = "awaiting_approval" if pending else "running"
    elif audit.status == "completed":
        timed_out = audit.error is not None and audit.error.kind == "timeout"
        state = "completed" if audit.success else "timed_out" if timed_out else "failed"
    else:
        state = {"canceled": "cancelled", "timed_out": "timed_out"}.get(audit.status, "failed")
    calls = [
        ToolCallRecord(
            **c.model_dump(include=set(ToolCallRecord.model_fields) - {"approval"}),
            approval=ApprovalRecord(decision=c.approval.decision, by=c.approval.by, comment=c.approval.comment)
            if c.approval
            else None,
        )
        for c in audit.calls
    ]
    return ExecutionStatus(
        state=state,  # type: ignore[arg-type]
        runtime=audit.runtime or "monty",
        pending_approvals=pending,
        tool_calls=calls,
        call_count=len(calls),
        runs=max(len(audit.runs), 1),
        stdout=audit.stdout,
        error=audit.error,
        ignored_signals=audit.ignored_signals,
    )


@click.command()
@click.argument("execution_id", metavar="ID")
@json_option
@address_option
def status(execution_id: str, as_json: bool, address: str) -> int:
    """An execution's state, pending approvals, tool calls so far and stdout (the status query)."""
    return asyncio.run(_status(execution_id, as_json, address))


async def _status(execution_id: str, as_json: bool, address: str) -> int:
    client = await open_client(address)
    waiting = await _queued_cell(client, execution_id)
    if waiting is not None:  # a session's cell that has not started: its session says why
        emit(waiting, [f"{execution_id}: {waiting.state} (waits for {waiting.waiting_for or 'its turn'})"], as_json=as_json)
        return EXIT_OK
    handle, desc = await existing_handle(client, execution_id)
    current = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    if current is None:
        current = status_from_audit(await fetch_audit(client, execution_id))
        if not as_json:
            note("(no worker answered the status query: read from the history)")
    current = settle(current, desc.status)
    emit(current, display.status_lines(execution_id, current), as_json=as_json)
    return EXIT_OK


async def _queued_cell(client: Client, execution_id: str) -> BaseModel | None:
    """The session's record of a cell (``session:NAME:N``) that is still waiting its turn."""
    from codemode.workflows.session_models import parse_cell_execution_id

    parsed = parse_cell_execution_id(execution_id)
    if parsed is None:
        return None
    try:
        await client.get_workflow_handle(execution_id).describe()
        return None  # it runs (or ran): its own status says more
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    from codemode.worker.client.sessions import SessionError, describe_session

    try:
        status = await describe_session(client, parsed[0])
    except SessionError:
        return None
    return next((r for r in [*status.queued, *status.recent] if r.index == parsed[1]), None)


@click.command()
@click.argument("execution_id", metavar="ID")
@json_option
@address_option
def history(execution_id: str, as_json: bool, address: str) -> int:
    """The audit timeline from the Temporal history: calls, attempts, approvals, timings."""
    return asyncio.run(_history(execution_id, as_json, address))


async def _history(execution_id: str, as_json: bool, address: str) -> int:
    client = await open_client(address)
    await existing_handle(client, execution_id)
    audit = await fetch_audit(client, execution_id)
    emit(audit, display.audit_lines(audit), as_json=as_json)
    return EXIT_OK


# -- list ---------------------------------------------------------------------------------------------

#: The state words, the same in `status`, `list` and the CodeModeStatus search attribute.
STATES = ("running", "awaiting_approval", "completed", "failed", "cancelled", "timed_out")
#: Each state as a visibility query. Temporal's own close status is asked too: it is right even
#: when the workflow could not update CodeModeStatus (terminated, or cancelled by an older
#: workflow version), and it keeps a closed run out of the running states.
STATE_QUERIES = {
    "running": f'ExecutionStatus="Running" AND {SA_STATUS}="running"',
    "awaiting_approval": f'ExecutionStatus="Running" AND {SA_STATUS}="awaiting_approval"',
    "completed": f'ExecutionStatus="Completed" AND {SA_STATUS}="completed"',
    "failed": f'(ExecutionStatus="Failed" OR ExecutionStatus="Terminated" OR {SA_STATUS}="failed")',
    "cancelled": f'(ExecutionStatus="Canceled" OR {SA_STATUS}="cancelled")',
    "timed_out": f'(ExecutionStatus="TimedOut" OR {SA_STATUS}="timed_out")',
}
DESCRIBE_AT_ONCE = 8


class ListedExecution(BaseModel):
    execution_id: str
    state: str
    runtime: str | None = None
    started_at: datetime
    closed_at: datetime | None = None
    summary: str | None = None


class ExecutionList(BaseModel):
    query: str
    executions: list[ListedExecution]


def list_query(state: str | None, runtime: str | None) -> str:
    """The visibility query for ``codemode list``: our workflow type, the latest run of each
    execution (a continued-as-new run is not a separate execution), then the filters."""
    parts = [f'WorkflowType="{WORKFLOW_TYPE}"', 'ExecutionStatus!="ContinuedAsNew"']
    if state:
        parts.append(STATE_QUERIES[state])
    if runtime:
        parts.append(f'{SA_RUNTIME}="{runtime}"')
    return " AND ".join(parts)


def state_of(execution: WorkflowExecution) -> str:
    """One of STATES, from Temporal's status and the CodeModeStatus search attribute."""
    indexed = execution.typed_search_attributes.get(STATUS_KEY)
    if execution.status == WorkflowExecutionStatus.RUNNING:
        return indexed if indexed in ("running", "awaiting_approval") else "running"
    if execution.status in CLOSED_STATES:
        return CLOSED_STATES[execution.status]
    return indexed if indexed in STATES[2:] else "completed"


async def _summary(client: Client, execution_id: str, run_id: str, gate: asyncio.Semaphore) -> str | None:
    """The workflow's summary (user metadata, which the list call does not return)."""
    async with gate:
        try:
            desc = await client.get_workflow_handle(execution_id, run_id=run_id).describe()
        except RPCError:
            return None
        try:
            summary = await desc.static_summary()
        except (KeyError, UnknownEncryptionKey, DecryptionFailed):  # encrypted, and we lack the key
            key = desc.raw_description.execution_config.user_metadata.summary.metadata.get(KEY_ID_METADATA, b"?")
            return f"(encrypted under key {key.decode(errors='replace')!r})"
        return unplain(summary) if summary else summary


def list_lines(listing: ExecutionList) -> list[str]:
    """An aligned table, one line per execution; the summary last, on one line."""
    rows = [("ID", "STATE", "RUNTIME", "STARTED", "SUMMARY")]
    for e in listing.executions:
        started = e.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        summary = " ".join((e.summary or "").split())
        rows.append((e.execution_id, e.state, e.runtime or "?", started, summary))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[4]]).rstrip() for row in rows
    ]


@click.command(name="list")
@click.option("--status", "state", type=click.Choice(STATES), default=None, help="Only executions in this state.")
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default=None, help="Only executions on this runtime.")
@click.option(
    "--limit", type=click.IntRange(min=1), default=20, show_default=True, metavar="N", help="At most N executions."
)
@json_option
@address_option
def list_executions(state: str | None, runtime: str | None, limit: int, as_json: bool, address: str) -> int:
    """Executions newest first, from the server's visibility index (no worker needed)."""
    return asyncio.run(_list(state, runtime, limit, as_json, address))


async def _list(state: str | None, runtime: str | None, limit: int, as_json: bool, address: str) -> int:
    client = await open_client(address)
    query = list_query(state, runtime)
    try:
        found = [e async for e in client.list_workflows(query, limit=limit)]
    except RPCError as err:
        if err.status == RPCStatusCode.INVALID_ARGUMENT and (state or runtime):
            raise Fail(
                f"the server refused the query ({err.message}); --status and --runtime need the search "
                f"attributes {SA_STATUS} and {SA_RUNTIME} (Keyword), which `codemode server` registers"
            ) from None
        raise
    # The server lists running executions first, then closed ones by close time: show newest first.
    found.sort(key=lambda e: e.start_time, reverse=True)
    gate = asyncio.Semaphore(DESCRIBE_AT_ONCE)
    summaries = await asyncio.gather(*(_summary(client, e.id, e.run_id, gate) for e in found))
    listing = ExecutionList(
        query=query,
        executions=[
            ListedExecution(
                execution_id=e.id,
                state=state_of(e),
                runtime=e.typed_search_attributes.get(RUNTIME_KEY),
                started_at=e.start_time,
                closed_at=e.close_time,
                summary=summary,
            )
            for e, summary in zip(found, summaries, strict=True)
        ],
    )
    if not as_json and not found:
        note("no executions" + (" match" if state or runtime else ""))
        return EXIT_OK
    emit(listing, list_lines(listing), as_json=as_json)
    return EXIT_OK
