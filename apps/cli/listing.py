"""``codemode list``: the executions the server's visibility index knows, by state and runtime
(no worker needed)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

import click
from pydantic import BaseModel
from temporalio.client import Client, WorkflowExecution, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from codemode.apps.cli.common import emit, json_option, open_client
from codemode.apps.command_line import EXIT_OK, Fail, connection_options, note
from codemode.client.executions import unplain
from codemode.client.following import CLOSED_STATES
from codemode.runtimes import RUNTIMES
from codemode.storage.encryption import KEY_ID_METADATA, DecryptionFailed, UnknownEncryptionKey
from codemode.workflows.models import RUNTIME_KEY, SA_RUNTIME, SA_STATUS, STATUS_KEY, WORKFLOW_TYPE

if TYPE_CHECKING:
    from codemode.worker.connection import Target

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
@connection_options
def list_executions(state: str | None, runtime: str | None, limit: int, as_json: bool, target: Target) -> int:
    """Executions newest first, from the server's visibility index (no worker needed)."""
    return asyncio.run(_list(state, runtime, limit, as_json, target))


#: Each state as Temporal's own status alone, for a namespace without our search attributes.
UNINDEXED_QUERIES = {
    "running": 'ExecutionStatus="Running"',
    "awaiting_approval": 'ExecutionStatus="Running"',
    "completed": 'ExecutionStatus="Completed"',
    "failed": '(ExecutionStatus="Failed" OR ExecutionStatus="Terminated")',
    "cancelled": 'ExecutionStatus="Canceled"',
    "timed_out": 'ExecutionStatus="TimedOut"',
}
#: How many running executions a listing without the index reads, at most, per one it shows.
UNINDEXED_READ_FACTOR = 20


async def _awaiting(execution: WorkflowExecution) -> bool:
    """Whether a running execution waits for a decision: the memo lists its pending approvals."""
    try:
        return bool((await execution.memo()).get("pending_approvals"))
    except Exception:  # an encrypted memo without its key: it cannot tell
        return False


async def _list_unindexed(client: Client, state: str, limit: int) -> tuple[str, list[WorkflowExecution], dict[str, str]]:
    """The executions in ``state`` on a namespace without our search attributes: Temporal's
    status asked of the index, the rest (running or awaiting approval) read from each memo."""
    query = f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus!="ContinuedAsNew" AND {UNINDEXED_QUERIES[state]}'
    running = state in ("running", "awaiting_approval")
    found, states = [], {}
    async for e in client.list_workflows(query, limit=limit * UNINDEXED_READ_FACTOR if running else limit):
        if running:
            states[e.id] = "awaiting_approval" if await _awaiting(e) else "running"
            if states[e.id] != state:
                continue
        found.append(e)
        if len(found) >= limit:
            break
    return query, found, states


async def _list(state: str | None, runtime: str | None, limit: int, as_json: bool, target: Target) -> int:
    from codemode.client.requests import search_attributes_registered
    from codemode.worker.search_attributes import how_to_create

    client = await open_client(target, quick=True)
    query, states = list_query(state, runtime), {}
    try:
        if (state or runtime) and not await search_attributes_registered(client):
            if runtime:
                raise Fail(
                    f"--runtime needs the search attribute {SA_RUNTIME}, which namespace {client.namespace} "
                    f"lacks; create it: {how_to_create(client.namespace)}"
                )
            assert state is not None
            query, found, states = await _list_unindexed(client, state, limit)
        else:
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
                state=states.get(e.id) or state_of(e),
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
