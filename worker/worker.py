"""Composition root for workers: the workflow, the sandbox steps and one activity per tool.

A worker polls two task queues: the shared one (workflows, tools, any sandbox step) and its
own (steps of sandboxes it keeps live, for runtimes that cannot checkpoint).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from importlib.metadata import version as _version

from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from activities.checkpoints import CheckpointStore
from activities.retention import RetentionActivities, SweepInput
from activities.sandbox import SandboxActivities
from activities.storage import BlobStore
from activities.tool_activity import tool_activities
from activities.tools import ToolRegistry
from runtimes import CodeRuntime
from worker.converter import keyring_of, store_of
from worker.sandbox_runner import CodeModeWorkflowRunner
from workflows.code_execution import CodeExecutionWorkflow
from workflows.models import TASK_QUEUE
from workflows.session import CodeSessionWorkflow
from workflows.sweep import SWEEP_SCHEDULE_ID, SWEEP_WORKFLOW, StorageSweepWorkflow

#: How often the retention sweep runs (``codemode worker`` keeps a Schedule for it).
SWEEP_EVERY = timedelta(hours=1)


#: Stamped on every workflow task and activity attempt in the history. The SDK's default is
#: a 32-character hash of every loaded module (computed at start-up, and written three times
#: per tool call); the package version says which code ran just as well.
BUILD_ID = f"codemode-{_version('durable-codemode')}"


def session_queue_name(task_queue: str) -> str:
    return f"{task_queue}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


class CodeModeWorker:
    """The workers of one process. Use as an async context manager or call ``run()``."""

    def __init__(
        self,
        client: Client,
        registry: ToolRegistry,
        *,
        task_queue: str = TASK_QUEUE,
        runtimes: Mapping[str, CodeRuntime] | None = None,
        keep_alive_seconds: float = 60.0,
        max_concurrent_activities: int = 200,
        store: BlobStore | None = None,
        session_keep_alive_seconds: float = 900.0,
    ) -> None:
        self.client = client
        self.registry = registry
        self.task_queue = task_queue
        self.session_queue = session_queue_name(task_queue)
        store = store or store_of(client.data_converter)
        if store is None:
            raise ValueError(
                "the client's data converter has no object store: connect with worker.client.connect() "
                "(or pass data_converter=worker.converter.data_converter(store))"
            )
        self.store = store
        self.sandbox = SandboxActivities(
            registry,
            # Checkpoints are sealed under the same keys as the client's payloads.
            CheckpointStore(store, keys=keyring_of(client.data_converter)),
            runtimes=runtimes,
            session_queue=self.session_queue,
            keep_alive_seconds=keep_alive_seconds,
            session_keep_alive_seconds=session_keep_alive_seconds,
        )
        self.shared = Worker(
            client,
            task_queue=task_queue,
            workflows=[CodeExecutionWorkflow, CodeSessionWorkflow, StorageSweepWorkflow],
            # The SDK's sandbox (restrictions, fresh modules per run), without an exec per
            # payload for its serialization context, its modules compiled once
            # (worker/sandbox_runner.py).
            workflow_runner=CodeModeWorkflowRunner(),
            activities=[*self.sandbox.activities(), RetentionActivities(store).sweep, *tool_activities(registry, self.sandbox)],
            max_concurrent_activities=max_concurrent_activities,
            max_concurrent_local_activities=max_concurrent_activities,
            # Calls gathered by the code are scheduled together: poll for (and, on a server
            # with eager activity execution, receive with the workflow task) several at once.
            activity_task_poller_behavior=PollerBehaviorSimpleMaximum(maximum=16),
            max_eager_activity_reservations_per_workflow_task=16,
            build_id=BUILD_ID,
            # Tools heartbeat so a cancelled execution's running tool hears of it within a
            # second or so (the SDK otherwise sends a heartbeat at most every 30 s).
            default_heartbeat_throttle_interval=timedelta(seconds=1),
        )
        self.sticky = Worker(
            client, task_queue=self.session_queue, activities=self.sandbox.activities(), build_id=BUILD_ID
        )

    async def ensure_sweep_schedule(self, every: timedelta = SWEEP_EVERY) -> bool:
        """Keep the hourly retention sweep scheduled on this task queue (idempotent); False
        when it already existed."""
        from temporalio.client import (
            Schedule,
            ScheduleActionStartWorkflow,
            ScheduleAlreadyRunningError,
            ScheduleIntervalSpec,
            ScheduleSpec,
        )

        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                SWEEP_WORKFLOW, SweepInput(namespace=self.client.namespace), id=SWEEP_SCHEDULE_ID, task_queue=self.task_queue
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=every)]),
        )
        try:
            await self.client.create_schedule(SWEEP_SCHEDULE_ID, schedule)
        except ScheduleAlreadyRunningError:
            return False
        return True

    async def run(self) -> None:
        try:
            await asyncio.gather(self.shared.run(), self.sticky.run())
        finally:
            await self._tell_sessions_their_process_is_gone()
            await self.sandbox.aclose()

    async def _tell_sessions_their_process_is_gone(self) -> None:
        """Sessions whose live process this worker held learn it is gone now, so their next
        cell rebuilds at once instead of first waiting for this worker's queue. (A worker
        that is killed cannot say it: its sessions' next cells wait that long once.)"""
        for owner, key in self.sandbox.kept_session_owners():
            with contextlib.suppress(Exception):
                await self.client.get_workflow_handle(owner).signal("live_lost", key)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CodeModeWorker]:
        task = asyncio.create_task(self.run())
        try:
            yield self
        finally:
            await asyncio.gather(self.shared.shutdown(), self.sticky.shutdown(), return_exceptions=True)
            with contextlib.suppress(Exception):
                await task
