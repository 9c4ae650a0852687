"""``codemode status`` and ``codemode history``: what an execution is doing now (the status
query, or the history when no worker answers) and the audit timeline from its history."""

from __future__ import annotations

import asyncio

import click

from worker import display
from worker.cli.common import (
    EXIT_OK,
    address_option,
    emit,
    existing_handle,
    has_workers,
    json_option,
    note,
    open_client,
    query_status,
)
from worker.history import ExecutionAudit, fetch_audit
from workflows.models import ApprovalRecord, ExecutionStatus, ToolCallRecord


def status_from_audit(audit: ExecutionAudit) -> ExecutionStatus:
    """The status as the history shows it, for when no worker can answer the query."""
    pending = audit.pending_approvals()
    if audit.status == "running":
        state = "awaiting_approval" if pending else "running"
    else:
        state = "completed" if audit.success else "failed"
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
        stdout=audit.stdout,
        error=audit.error,
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
    handle, desc = await existing_handle(client, execution_id)
    current = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    if current is None:
        current = status_from_audit(await fetch_audit(client, execution_id))
        if not as_json:
            note("(no worker answered the status query: read from the history)")
    emit(current, display.status_lines(execution_id, current), as_json=as_json)
    return EXIT_OK


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
