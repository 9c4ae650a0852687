"""Retention: delete what executions stored once nobody can read their histories any more.

Sessions too: a session deletes its own state when it closes (idle timeout, or ``close``);
what is left (a close that failed half-way, the claim-checked payloads of its history) goes
like an execution's, once the session has been closed for longer than ``keep``.

While an execution runs, its state in the object store is live: checkpoints (the step
before the current one is deleted as the run moves on, the last one when it ends) and the
claim-checked payloads its history refers to. After it closes, only those payloads are
left, and they stay as long as its history does, so ``codemode history`` and the web UI can
still show every argument and result. A sweep then deletes an execution's objects once its
latest run has been closed for longer than ``keep`` (default: the namespace's retention, the
time Temporal keeps the history) or Temporal no longer knows it. A running execution is never
touched, whatever its age. The sweep runs as a Temporal Schedule (``codemode worker`` keeps
one) and as ``codemode gc``.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from . import names
from .records import EXECUTION_WORKFLOW_TYPE, SESSION_WORKFLOW_TYPE

#: The workflow types whose executions store objects: code executions (a session's cells are
#: executions too) and sessions (their state between cells); and none (the SDK names no type
#: for what a client sends a running workflow, e.g. a cell's Update: ``wt/null``).
OWNER_TYPES = (EXECUTION_WORKFLOW_TYPE, SESSION_WORKFLOW_TYPE, None)
from codemode.storage import BlobStore, key_segment

log = logging.getLogger(__name__)


class SweepInput(BaseModel):
    namespace: str = "default"
    #: How long after an execution closes its objects are kept (None: the namespace's retention).
    keep: timedelta | None = None
    dry_run: bool = False


class SweepReport(BaseModel):
    keep: timedelta
    #: Executions whose objects were deleted (or would be, in a dry run).
    deleted: list[str] = Field(default_factory=list)
    objects_deleted: int = 0
    #: Executions with objects still kept: running, or closed less than ``keep`` ago.
    kept: list[str] = Field(default_factory=list)
    dry_run: bool = False


def execution_prefixes(namespace: str, execution_id: str) -> list[str]:
    """Every key prefix under which one execution or session (all its runs) stores objects."""
    ns, wid = key_segment(namespace), key_segment(execution_id)
    return [*(f"v0/ns/{ns}/wt/{key_segment(t)}/wi/{wid}/" for t in OWNER_TYPES), f"codemode/ns/{ns}/wi/{wid}/"]


async def stored_executions(store: BlobStore, namespace: str) -> set[str]:
    """The execution (and session) ids that have objects in the store."""
    ns = key_segment(namespace)
    roots = [*(f"v0/ns/{ns}/wt/{key_segment(t)}/wi/" for t in OWNER_TYPES), f"codemode/ns/{ns}/wi/"]
    found: set[str] = set()
    for root in roots:
        for key in await store.list_keys(bucket=store.bucket, prefix=root):
            segment = key[len(root) :].split("/", 1)[0]
            if segment:
                found.add(unquote(segment))
    return found


async def namespace_retention(client: Client, namespace: str) -> timedelta:
    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

    resp = await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
    ttl = resp.config.workflow_execution_retention_ttl
    return timedelta(seconds=ttl.seconds, microseconds=ttl.nanos // 1000)


async def sweep(
    client: Client, store: BlobStore, inp: SweepInput, *, now: datetime | None = None
) -> SweepReport:
    """Delete the objects of every execution closed for longer than ``keep`` (or unknown)."""
    keep = inp.keep if inp.keep is not None else await namespace_retention(client, inp.namespace)
    now = now or datetime.now(UTC)
    report = SweepReport(keep=keep, dry_run=inp.dry_run)
    for execution_id in sorted(await stored_executions(store, inp.namespace)):
        try:
            desc = await client.get_workflow_handle(execution_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            desc = None  # purged: nothing can read what it stored
        if desc is not None:
            closed = desc.status not in (None, WorkflowExecutionStatus.RUNNING)
            if not closed or desc.close_time is None or desc.close_time + keep > now:
                report.kept.append(execution_id)
                continue
        report.deleted.append(execution_id)
        if not inp.dry_run:
            for prefix in execution_prefixes(inp.namespace, execution_id):
                report.objects_deleted += await store.delete_prefix(bucket=store.bucket, prefix=prefix)
    return report


class RetentionActivities:
    """The sweep as an activity (run by the sweep Schedule's workflow)."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store

    @activity.defn(name=names.STORAGE_SWEEP)
    async def sweep(self, inp: SweepInput) -> SweepReport:
        report = await sweep(activity.client(), self.store, inp)
        log.info("storage sweep: %d executions deleted, %d kept", len(report.deleted), len(report.kept))
        return report
