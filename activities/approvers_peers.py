"""Which approvers file the other workers of a task queue have (issue 45).

A worker of code mode says in its identity which approvers file it reads (``codemode-approvers=``
and the first 16 hex digits of the file's SHA-256, or ``none``), so any worker can see, from the
task queue's pollers (``DescribeTaskQueue``), the workers whose file differs from its own. A
worker without a file then never answers "no approvers file" for a call while a worker with one
polls the same queue (it fails the gate's attempt, and a worker with the file answers), and every
worker names, when it starts, the workers of its queue that read another file or none."""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path

from temporalio.client import Client

log = logging.getLogger(__name__)

TAG = "codemode-approvers="
_TAG = re.compile(re.escape(TAG) + r"([0-9a-f]{16}|none)")


def tag_of_file(path: str | Path | None) -> str:
    """This worker's tag: the file's hash (its first 16 hex digits) or ``none``."""
    if path is None:
        return "none"
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "none"


def with_tag(identity: str, tag: str) -> str:
    """``identity`` with the approvers tag (replacing one it has)."""
    return f"{_TAG.sub('', identity).strip()} {TAG}{tag}".strip()


def tag_in(identity: str) -> str | None:
    """The approvers tag a worker's identity carries (None: a worker that does not say)."""
    m = _TAG.search(identity)
    return m.group(1) if m else None


async def pollers(client: Client, task_queue: str, *, activities: bool = True) -> dict[str, str | None]:
    """The identities polling ``task_queue`` (its activity or workflow side) -> their tag.
    Empty when the server does not say (no permission to describe the queue)."""
    from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    kind = TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY if activities else TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW
    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
                task_queue_type=kind,
            )
        )
    except RPCError as err:
        log.debug("cannot list the pollers of %s: %s", task_queue, err)
        return {}
    return {p.identity: tag_in(p.identity) for p in resp.pollers}


async def differing(client: Client, task_queue: str, own: str) -> dict[str, str]:
    """The workers of ``task_queue`` that read another approvers file than ``own`` (or none
    where this one has one, or one where this one has none): identity -> their tag."""
    found = await pollers(client, task_queue)
    return {ident: tag for ident, tag in found.items() if tag is not None and tag != own}


def describe(workers: dict[str, str]) -> str:
    return ", ".join(
        f"{ident} ({'no approvers file' if tag == 'none' else f'approvers file {tag}…'})"
        for ident, tag in workers.items()
    )


async def report(client: Client, task_queue: str, own: str) -> dict[str, str]:
    """Log (a warning) the workers of ``task_queue`` whose approvers file differs from this
    one's: what ``codemode worker`` says when it starts. Returns them."""
    others = await differing(client, task_queue, own)
    if others:
        mine = "no approvers file" if own == "none" else f"approvers file {own}…"
        log.warning(
            "workers of task queue %s read another approvers file than this one (%s): %s. Decisions are "
            "checked against the file a run pinned; give every worker the same file.",
            task_queue,
            mine,
            describe(others),
        )
    return others
