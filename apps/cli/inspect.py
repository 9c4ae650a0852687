"""``codemode status`` and ``codemode history``: what an execution is doing now (the status
query, or the history when no worker answers) and the audit timeline from its history.
(``codemode list``: ``listing.py``.)

A session's id (``session:NAME``) stands for its running cell: ``status`` shows that cell,
and the calls it waits on, or the session when it runs none.

Imports click and ``common`` only; the rest when a command runs (``codemode status`` is what a
person types while deciding)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from codemode.apps.cli.common import emit, existing_handle, find_execution, json_option, open_client
from codemode.apps.command_line import EXIT_OK, connection_options, note

if TYPE_CHECKING:
    from pydantic import BaseModel
    from temporalio.client import Client, WorkflowExecutionStatus

    from codemode.client.histories.audit import ExecutionAudit
    from codemode.worker.connection import Target
    from codemode.workflows.models import ExecutionStatus


def settle(status: ExecutionStatus, closed_as: WorkflowExecutionStatus | None) -> ExecutionStatus:
    """Temporal's close status wins over the workflow's last word: a run cancelled while parked
    is not awaiting approval any more. (A word the status model does not know yet reads failed.)"""
    from typing import get_args

    from codemode.client.following import CLOSED_STATES
    from codemode.workflows.models import ExecutionState

    if closed_as not in CLOSED_STATES:
        return status
    word = CLOSED_STATES[closed_as]
    known = word in get_args(ExecutionState)
    return status.model_copy(update={"state": word if known else "failed", "pending_approvals": []})


def status_from_audit(audit: ExecutionAudit) -> ExecutionStatus:
    """The status as the history shows it, for when no worker can answer the query."""
    from codemode.workflows.models import ApprovalRecord, ExecutionStatus, ToolCallRecord

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
            approval=ApprovalRecord(
                **c.approval.model_dump(include={"decision", "by", "comment", "door", "answered"}),
                asked_arguments=c.approval.asked_arguments,
                approved_arguments=c.approval.approved_arguments,
            )
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
@connection_options
def status(execution_id: str, as_json: bool, target: Target) -> int:
    """An execution's state, pending approvals, tool calls so far and stdout (the status query).

    ID is an execution's id, or a session's (session:NAME): then its running cell's status."""
    import asyncio

    return asyncio.run(_status(execution_id, as_json, target))


async def _status(execution_id: str, as_json: bool, target: Target) -> int:
    from codemode.client import display
    from codemode.client.backend import has_workers
    from codemode.client.following import query_status

    client = await open_client(target, quick=True)
    waiting = await _queued_cell(client, execution_id)
    if waiting is not None:  # a session's cell that has not started: its session says why
        emit(
            waiting,
            [f"{execution_id}: {waiting.state} (waits for {waiting.waiting_for or 'its turn'})"],
            as_json=as_json,
        )
        return EXIT_OK
    found = await find_execution(client, execution_id)
    if found.handle is None:  # a session that runs no cell now: the session's own status
        from codemode.apps.cli.session import show_session

        note(f"session {found.session} runs no cell now")
        return await show_session(client, found.session, as_json=as_json)
    handle, desc, execution_id = found.handle, found.description, found.execution_id
    current = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    if current is None:
        from codemode.client.histories.audit import fetch_audit

        current = status_from_audit(await fetch_audit(client, execution_id))
        if not as_json:
            note("(no worker answered the status query: read from the history)")
    current = settle(current, desc.status)
    emit(current, display.status_lines(execution_id, current), as_json=as_json)
    return EXIT_OK


async def _queued_cell(client: Client, execution_id: str) -> BaseModel | None:
    """The session's record of a cell (``session:NAME:N``) that is still waiting its turn."""
    if not execution_id.startswith("session:"):  # (no session's module for other executions)
        return None
    from temporalio.service import RPCError, RPCStatusCode

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
    from codemode.client.sessions import SessionError, describe_session

    try:
        status = await describe_session(client, parsed[0])
    except SessionError:
        return None
    return next((r for r in [*status.queued, *status.recent] if r.index == parsed[1]), None)


@click.command()
@click.argument("execution_id", metavar="ID")
@json_option
@click.option(
    "--verify",
    is_flag=True,
    help="Re-check every decision offline: who, what exactly they approved, whether each signature holds, "
    "which rule applied. Exits 1 naming the calls that do not verify.",
)
@click.option(
    "--approvers",
    "approvers",
    default=None,
    metavar="FILE",
    help="With --verify: the public keys from this approvers file (old keys under retired_keys) instead of "
    "the ones the history recorded.",
)
@click.option(
    "--history-file",
    "history_file",
    default=None,
    metavar="FILE",
    help="With --verify: a history exported as JSON (`temporal workflow show --output json`, the SDK's "
    "WorkflowHistory.to_json) instead of the server's.",
)
@connection_options
def history(
    execution_id: str, as_json: bool, verify: bool, approvers: str | None, history_file: str | None, target: Target
) -> int:
    """The audit timeline from the Temporal history: calls, attempts, approvals, timings."""
    import asyncio

    if verify or history_file:
        from codemode.apps.cli.verify import verify_command

        return asyncio.run(verify_command(execution_id, as_json, approvers, history_file, target))
    return asyncio.run(_history(execution_id, as_json, target))


async def _history(execution_id: str, as_json: bool, target: Target) -> int:
    from codemode.client import display
    from codemode.client.histories.audit import fetch_audit

    client = await open_client(target, quick=True)
    await existing_handle(client, execution_id)
    audit = await fetch_audit(client, execution_id)
    emit(audit, display.audit_lines(audit), as_json=as_json)
    return EXIT_OK
