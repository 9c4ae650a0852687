"""What the inbox shows, read from Temporal (no worker needed): the calls waiting across
executions (the visibility index's status attribute and each run's memo), one call with its
code and the calls before it (the history's audit), and recent decisions."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowExecutionStatus

from codemode.client.histories.audit import ApprovalAudit, CallAudit, ExecutionAudit, fetch_audit
from codemode.workflows.models import SA_STATUS, WORKFLOW_TYPE

#: Executions listed at most (the page is for people, not for a backlog of thousands).
MAX_EXECUTIONS = 200
#: Executions whose histories the decisions page reads.
RECENT_EXECUTIONS = 25


@dataclass
class PendingRow:
    execution_id: str
    call_id: str
    tool: str
    summary: str
    asked_at: datetime | None
    deadline: datetime | None
    line: int | None = None

    @property
    def left(self) -> str:
        return time_left(self.deadline)


@dataclass
class CallView:
    execution_id: str
    call_id: str
    audit: ExecutionAudit
    call: CallAudit | None
    pending: bool
    asked_at: datetime | None = None
    deadline: datetime | None = None
    earlier: list[CallAudit] = field(default_factory=list)

    @property
    def left(self) -> str:
        return time_left(self.deadline)

    @property
    def arguments(self) -> dict[str, Any]:
        c = self.call
        if c is None:
            return {}
        return c.arguments if c.arguments is not None else {**{str(i): a for i, a in enumerate(c.args)}, **c.kwargs}


@dataclass
class DecisionRow:
    execution_id: str
    call_id: str
    summary: str
    approval: ApprovalAudit


def _when(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        return None


def time_left(deadline: datetime | None, now: datetime | None = None) -> str:
    if deadline is None:
        return "no deadline"
    seconds = (deadline - (now or datetime.now(UTC))).total_seconds()
    if seconds <= 0:
        return "expired"
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    return f"{max(minutes, 1)} min"


async def pending_calls(client: Client, tool: str | None = None) -> list[PendingRow]:
    """Every call waiting for a person, newest first (``tool``: only that tool's)."""
    rows: list[PendingRow] = []
    query = f'WorkflowType="{WORKFLOW_TYPE}" AND {SA_STATUS}="awaiting_approval" AND ExecutionStatus="Running"'
    async for wf in client.list_workflows(query, limit=MAX_EXECUTIONS):
        try:
            entries = (await wf.memo()).get("pending_approvals") or []
        except Exception:  # noqa: BLE001 - a memo we cannot decode (no key here): skip the run
            continue
        for e in entries:
            if not isinstance(e, dict) or (tool and e.get("tool") != tool):
                continue
            rows.append(
                PendingRow(
                    execution_id=wf.id,
                    call_id=str(e.get("call_id")),
                    tool=str(e.get("tool", "")),
                    summary=str(e.get("summary", "")),
                    asked_at=_when(e.get("asked_at")) or wf.start_time,
                    deadline=_when(e.get("deadline")),
                    line=e.get("line"),
                )
            )
    rows.sort(key=lambda r: r.asked_at or datetime.min.replace(tzinfo=UTC), reverse=True)
    return rows


async def call_view(client: Client, execution_id: str, call_id: str) -> CallView | None:
    """One call and its context; None when the execution does not exist."""
    handle = client.get_workflow_handle(execution_id)
    try:
        desc = await handle.describe()
    except Exception:  # noqa: BLE001 - not found, or not ours
        return None
    audit = await fetch_audit(client, execution_id)
    memo = {}
    if desc.status == WorkflowExecutionStatus.RUNNING:
        try:
            memo = await desc.memo()
        except Exception:  # noqa: BLE001
            memo = {}
    entry = next(
        (e for e in memo.get("pending_approvals") or [] if isinstance(e, dict) and str(e.get("call_id")) == call_id),
        None,
    )
    calls = audit.calls
    call = next((c for c in calls if c.call_id == call_id), None)
    at = next((i for i, c in enumerate(calls) if c.call_id == call_id), len(calls))
    earlier = calls[:at][-50:]  # the calls made before it, with their results
    return CallView(
        execution_id=execution_id,
        call_id=call_id,
        audit=audit,
        call=call,
        pending=entry is not None,
        asked_at=_when(entry.get("asked_at")) if entry else None,
        deadline=_when(entry.get("deadline")) if entry else None,
        earlier=earlier,
    )


async def recent_decisions(client: Client, limit: int = 50) -> list[DecisionRow]:
    """Decisions on the most recent executions that waited for a person, newest first."""
    ids = [wf.id async for wf in client.list_workflows(f'WorkflowType="{WORKFLOW_TYPE}"', limit=RECENT_EXECUTIONS)]
    gate = asyncio.Semaphore(5)

    async def one(execution_id: str) -> list[DecisionRow]:
        async with gate:
            try:
                audit = await fetch_audit(client, execution_id)
            except Exception:  # noqa: BLE001
                return []
        return [
            DecisionRow(execution_id, c.call_id, c.summary, c.approval) for c in audit.calls if c.approval is not None
        ]

    rows = [r for got in await asyncio.gather(*(one(i) for i in ids)) for r in got]
    rows.sort(key=lambda r: r.approval.at, reverse=True)
    return rows[:limit]
