"""``CodeModeWorker``: a worker that runs code mode alone, built on ``CodeModePlugin``.

The plugin (``worker/plugin.py``) is where a worker is assembled: the workflows, the sandbox
steps, one activity per tool, the converter, the runner. A worker polls two task queues: the
shared one (workflows, tools, any sandbox step) and its own (steps of sandboxes it keeps
live, for runtimes that cannot checkpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from codemode.activities.retention import SweepInput
from codemode.activities.sandbox_sweep import SandboxSweepInput
from codemode.activities.tools import ToolRegistry
from codemode.storage import BlobStore
from codemode.worker.converter import store_of
from codemode.worker.plugin import BUILD_ID, MAX_CONCURRENT_ACTIVITIES, CodeModePlugin, session_queue_name
from codemode.workflows.models import TASK_QUEUE
from codemode.workflows.sweep_workflow import (
    SANDBOX_SWEEP_SCHEDULE_ID,
    SANDBOX_SWEEP_WORKFLOW,
    SWEEP_SCHEDULE_ID,
    SWEEP_WORKFLOW,
)

__all__ = [
    "BUILD_ID",
    "SWEEP_EVERY",
    "CodeModeWorker",
    "ensure_sandbox_sweep_schedule",
    "ensure_sweep_schedule",
    "session_queue_name",
]

#: How often the retention sweep runs (``codemode worker`` keeps a Schedule for it).
SWEEP_EVERY = timedelta(hours=1)


class CodeModeWorker:
    """A worker of code mode alone (what ``codemode worker`` runs): a Temporal ``Worker`` on
    ``task_queue`` with a ``CodeModePlugin``, which also runs this process's own queue for
    live sandboxes. Use as an async context manager (``running()``) or call ``run()``."""

    def __init__(
        self,
        client: Client,
        registry: ToolRegistry,
        *,
        task_queue: str = TASK_QUEUE,
        max_concurrent_activities: int = MAX_CONCURRENT_ACTIVITIES,
        store: BlobStore | None = None,
        **plugin_options: Any,
    ) -> None:
        """``plugin_options``: ``CodeModePlugin``'s keyword arguments, stated once there
        (``runtimes``, ``keep_alive_seconds``, ``session_keep_alive_seconds``, ``mcp``: started
        MCP servers, which the worker closes when it stops; ``deployment_name``, ``build_id``,
        ``notify``, ``approvers``, ``encryption_keys``, ``tracing``...). ``store``: the object store
        (default: the one the client's converter carries)."""
        store = store or store_of(client.data_converter)
        if store is None:
            raise ValueError(
                "the client's data converter has no object store: connect with codemode.connect() "
                "(or pass data_converter=codemode.worker.converter.data_converter(store))"
            )
        self.client = client
        self.registry = registry
        self.task_queue = task_queue
        self.mcp = plugin_options.get("mcp")
        self.plugin = CodeModePlugin(registry, store=store, **plugin_options)
        self.worker = Worker(
            client,
            task_queue=task_queue,
            plugins=[self.plugin],
            max_concurrent_activities=max_concurrent_activities,
            max_concurrent_local_activities=max_concurrent_activities,
        )
        parts = self.plugin.parts_of(self.worker)
        self.sandbox = parts.sandbox
        self.session_queue = parts.session_queue
        self.store = parts.store

    async def ensure_sweep_schedule(self, every: timedelta = SWEEP_EVERY) -> bool:
        """Keep the hourly retention sweep scheduled on this task queue (idempotent); False
        when it already existed."""
        return await ensure_sweep_schedule(self.client, self.task_queue, every)

    async def ensure_sandbox_sweep_schedule(self, every: timedelta = SWEEP_EVERY) -> bool:
        """Keep the hourly sandbox sweep scheduled on this task queue (idempotent); False
        when it already existed."""
        return await ensure_sandbox_sweep_schedule(self.client, self.task_queue, every)

    async def run(self) -> None:
        await self.worker.run()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CodeModeWorker]:
        task = asyncio.create_task(self.run())
        try:
            yield self
        finally:
            with contextlib.suppress(Exception):
                await self.worker.shutdown()
            with contextlib.suppress(Exception):
                await task


async def ensure_sweep_schedule(client: Client, task_queue: str, every: timedelta = SWEEP_EVERY) -> bool:
    """Keep the retention sweep scheduled on ``task_queue`` (idempotent); False when it
    already existed. Any worker with a ``CodeModePlugin`` on that queue runs it."""
    return await _ensure_schedule(
        client, SWEEP_SCHEDULE_ID, SWEEP_WORKFLOW, SweepInput(namespace=client.namespace), task_queue, every
    )


async def ensure_sandbox_sweep_schedule(client: Client, task_queue: str, every: timedelta = SWEEP_EVERY) -> bool:
    """Keep the sandbox sweep (``activities/sandbox_sweep.py``) scheduled on ``task_queue``
    (idempotent); False when it already existed."""
    return await _ensure_schedule(
        client, SANDBOX_SWEEP_SCHEDULE_ID, SANDBOX_SWEEP_WORKFLOW, SandboxSweepInput(), task_queue, every
    )


async def _ensure_schedule(
    client: Client, schedule_id: str, workflow: str, arg: object, task_queue: str, every: timedelta
) -> bool:
    from temporalio.client import (
        Schedule,
        ScheduleActionStartWorkflow,
        ScheduleAlreadyRunningError,
        ScheduleIntervalSpec,
        ScheduleSpec,
    )

    schedule = Schedule(
        action=ScheduleActionStartWorkflow(workflow, arg, id=schedule_id, task_queue=task_queue),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
    )
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        return False
    return True
