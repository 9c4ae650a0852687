"""Rolling an execution back from a client (issue 47): what ``codemode rollback``, the inbox, the
MCP front and the framework adapters call.

``start_rollback`` asks a run that is still going for its ``rollback`` Update (its code stops at the
next step, and it compensates what it applied), or, for a run that has ended, starts a rollback of
its own: an execution with id ``rollback:ID`` that runs no code, reads the ended run's log by a
query (the server replays the ended run's history to answer it) and compensates what is left. Either
way the handle's result is an ``ExecutionOutcome`` whose ``undo`` says what became of each call.
Two rollbacks asked at once share one run; a later one compensates only what an earlier one did not.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.service import RPCError, RPCStatusCode

from codemode.client.executions import start_execution
from codemode.client.requests import search_attributes_registered, starter
from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome, RollbackOf, RollbackRequest
from codemode.workflows.session_models import SessionRollback, SessionRolledBack, session_workflow_id
from codemode.workflows.undo_run import ROLLBACK_PREFIX, rollback_id

__all__ = ("ROLLBACK_PREFIX", "RollbackRefused", "roll_back", "roll_back_session", "rollback_id", "start_rollback")


class RollbackRefused(ValueError):
    """The run cannot be rolled back (it started before undo existed, it does not exist...)."""


async def start_rollback(
    client: Client,
    execution_id: str,
    *,
    by: str | None = None,
    reason: str | None = None,
    order: Literal["reverse", "parallel"] = "reverse",
    door: str | None = None,
) -> WorkflowHandle[Any, ExecutionOutcome]:
    """Ask for the rollback of ``execution_id``; the handle whose result says how it went (the
    execution itself while it runs, else its ``rollback:ID`` run)."""
    who = (by or starter() or "").strip() or "anonymous"
    ask = RollbackRequest(by=who, reason=reason, door=door, order=order)
    handle = client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)
    try:
        desc = await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RollbackRefused(f"no execution {execution_id}") from None
        raise
    if desc.status == WorkflowExecutionStatus.RUNNING:
        try:
            await handle.start_update("rollback", ask, wait_for_stage=WorkflowUpdateStage.ACCEPTED)
            return handle
        except WorkflowUpdateFailedError as err:
            why = str(err.cause or err)
            if "code has ended" not in why:
                raise RollbackRefused(why) from None
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        # Its code ended a moment ago: once the run is closed, a run of its own rolls it back
        # (however it ended, its log is in its history).
        await asyncio.gather(handle.result(), return_exceptions=True)
        desc = await handle.describe()
    rid = rollback_id(execution_id)
    previous = None
    try:
        earlier = await client.get_workflow_handle(rid).describe()
        if earlier.status != WorkflowExecutionStatus.RUNNING:
            previous = earlier.run_id
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    request = CodeExecutionRequest(
        code="",
        rollback_of=RollbackOf(execution_id=execution_id, previous_run=previous, request=ask),
        started_by=who,
    )
    return await start_execution(
        client,
        request,
        execution_id=rid,
        task_queue=desc.task_queue or "codemode",
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


async def roll_back(client: Client, execution_id: str, **kwargs: Any) -> ExecutionOutcome:
    """Roll ``execution_id`` back and wait for the outcome (``start_rollback``'s arguments)."""
    handle = await start_rollback(client, execution_id, **kwargs)
    return await handle.result()


async def roll_back_session(
    client: Client,
    name: str,
    before: int,
    *,
    by: str | None = None,
    reason: str | None = None,
    order: Literal["reverse", "parallel"] = "reverse",
    door: str | None = None,
) -> SessionRolledBack:
    """Roll session ``name`` back to before cell ``before``: the calls of that cell and every later
    one are compensated (newest cell first, each by a rollback of its own), and the namespace goes
    back to where it was before it (its next cell rebuilds it). Refused (``RollbackRefused``) while
    a cell runs or waits, or past what the session can rebuild."""
    ask = SessionRollback(
        before=before,
        by=(by or starter() or "").strip() or "anonymous",
        reason=reason,
        door=door,
        order=order,
        index_search_attributes=await search_attributes_registered(client),
    )
    handle = client.get_workflow_handle(session_workflow_id(name))
    try:
        return await handle.execute_update("rollback", ask, result_type=SessionRolledBack)
    except WorkflowUpdateFailedError as err:
        raise RollbackRefused(str(err.cause or err)) from None
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise RollbackRefused(f"no open session {name!r}") from None
        raise
