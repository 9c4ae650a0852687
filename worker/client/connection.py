"""Reaching Temporal from a client: the address, whether a server answers there, a client with
our data converter, and whether any worker polls a task queue.

The CLI imports this module to start every command (``DEFAULT_ADDRESS``), so it imports the
standard library only; Temporal and our converter are imported when a client connects."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.activities.storage import BlobStore

DEFAULT_ADDRESS = "localhost:7233"


def default_address() -> str:
    return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {address!r}: expected HOST:PORT, e.g. localhost:7233")
    return host, int(port)


def server_answers(address: str, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at the address (cheap; no gRPC)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


async def connect(
    address: str | None = None,
    *,
    namespace: str = "default",
    tracer: Any | None = None,
    store: BlobStore | None = None,
    **kwargs: Any,
) -> Client:
    """A client with our data converter (pydantic JSON, large payloads in the object store;
    every client and worker must use it) and OpenTelemetry tracing (spans go to the
    application's tracer provider, or ``tracer``), both made by ``CodeModePlugin``. ``store``
    defaults to the one the environment configures (``activities/storage.py``). The plugin
    itself is not installed on the client: workers built on it add their own (with their
    tools), as ``CodeModeWorker`` does. (What the plugin would set, built here without the
    worker side, which a client does not need: ``CodeModePlugin.make_data_converter`` and
    its interceptors.)"""
    from temporalio.client import Client

    if "data_converter" not in kwargs:
        from codemode.worker.converter import data_converter, default_store

        kwargs["data_converter"] = data_converter(store or await default_store())
    if "interceptors" not in kwargs:
        from codemode.worker import telemetry

        kwargs["interceptors"] = telemetry.interceptors_for(tracer)
    return await Client.connect(address or default_address(), namespace=namespace, **kwargs)


async def has_workers(client: Client, task_queue: str) -> bool:
    """Whether any worker polls the task queue for workflow tasks."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
    from temporalio.service import RPCError

    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # cannot tell: assume yes rather than start a second worker
    return any(not gone_local_process(p.identity) for p in resp.pollers)


def gone_local_process(identity: str) -> bool:
    """Whether a poller's identity (the SDK's ``pid@host``) names a process of this machine
    that has exited: the server lists a stopped worker's poller for a while, and a command
    started right after one (a client restarting ``codemode mcp``) must not count on it."""
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
