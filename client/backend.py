"""Opening a backend: where every application connects. Given resolved connection settings
(a ``Target``), ``open_backend`` returns a client and, when this process must run them itself,
the embedded Temporal server (nothing answers at a local, unconfigured address) and a worker
(no worker polls the task queue and there are tools to serve). ``connect_to`` is the same
first step for a command that only asks or decides. The server is probed once.

Failures are typed (``BackendError`` and its kinds, ``ConnectionRefused``,
``EncryptionKeyError``, ``ToolSourceError``); each ``str()`` is the one line a person reads,
and the applications word their own hints around the kinds they care about.

Imports the standard library only at the top: ``codemode status`` connects through here
without loading a worker."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codemode.worker.connection import Target, embedding_refused, local_target, server_answers, split_address

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.storage import BlobStore
    from codemode.worker.dev_server import EmbeddedServer
    from codemode.worker.tool_sources import Tools
    from codemode.worker.worker import CodeModeWorker

log = logging.getLogger("codemode.client")


class BackendError(RuntimeError):
    """Temporal could not be reached or brought up; ``str()`` says why, in one line."""


class NoServerAnswers(BackendError):
    """Nothing answers at the target, and no embedded server may replace it (configured, TLS,
    or not this machine's address) or none was asked for."""

    def __init__(self, target: Target, why: str = "") -> None:
        self.target = target
        super().__init__(f"no Temporal server answers at {target.describe()}{why}")


class NothingToServe(BackendError):
    """Nothing answers at a local address where the embedded server could start, but there are
    no tools for the worker it would need."""

    def __init__(self, target: Target) -> None:
        self.target = target
        super().__init__(f"no Temporal server answers at {target.address} and there are no tools to serve")


class ServerStartFailed(BackendError):
    """The embedded server did not start (its log's tail is in the message)."""


class StoreUnavailable(BackendError):
    """The object store the environment configures cannot be opened."""


async def open_store() -> BlobStore:
    """The object store the environment configures (payloads and checkpoints live there)."""
    from codemode.storage import BlobStoreError
    from codemode.worker.converter import default_store

    try:
        return await default_store()
    except (BlobStoreError, ValueError) as err:
        raise StoreUnavailable(f"cannot open the object store: {err}") from None


def check_encryption_keys() -> None:
    """Raise ``EncryptionKeyError`` for a malformed ``CODEMODE_ENCRYPTION_KEYS`` (said before
    anything connects: it is a configuration error, not a connection failure)."""
    from codemode.storage.encryption import Keyring

    Keyring.from_env()


async def connect_to(target: Target, *, quick: bool = False, probed: bool = False, **options: Any) -> Client:
    """A client for ``target``, with the store and the keys checked first. ``quick``: a
    command that asks or decides and exits installs the tracing interceptor only when this
    process has a tracer provider (without one the spans would go nowhere, and importing the
    interceptor is a third of such a command's start-up). ``options`` go to ``Client.connect``.
    Raises ``NoServerAnswers`` (unless ``probed``: the caller just saw it answer),
    ``StoreUnavailable``, ``EncryptionKeyError``, ``ConnectionRefused`` or ``BackendError``."""
    from codemode.worker import telemetry
    from codemode.worker.connection import ConnectionRefused, connect

    if not probed and not server_answers(target.address):
        raise NoServerAnswers(target)
    await open_store()
    check_encryption_keys()
    try:
        tracing = False if quick and not telemetry.tracer_provider_configured() else None
        return await connect(target=target, tracer=tracing, **options)
    except ConnectionRefused:
        raise
    except Exception as err:
        raise BackendError(f"cannot connect to Temporal at {target.describe()}: {type(err).__name__}: {err}") from None


async def start_embedded(
    port: int,
    ui_port: int | None = None,
    db: str | None = None,
    codec_port: int | None = None,
    *,
    namespace: str | None = None,
    note: Callable[[str], None] = log.warning,
) -> EmbeddedServer:
    """The embedded server, started (with a codec server for its web UI when encryption keys
    are set; ``codec_port`` defaults to ``codec_server.DEFAULT_PORT``). Raises
    ``EncryptionKeyError``, ``StoreUnavailable`` or ``ServerStartFailed``."""
    from codemode.worker.codec_server import DEFAULT_PORT
    from codemode.worker.dev_server import ServerStartError, start_dev_server

    check_encryption_keys()  # a malformed CODEMODE_ENCRYPTION_KEYS is said first
    await open_store()
    try:
        return await start_dev_server(port, ui_port, db, codec_port=codec_port or DEFAULT_PORT, notify=note, namespace=namespace)
    except (ServerStartError, FileNotFoundError) as err:
        raise ServerStartFailed(f"cannot start the embedded Temporal server: {err}") from None


@dataclass
class Backend:
    """What ``open_backend`` brought up, for as long as its block runs."""

    client: Client
    #: Where clients reach Temporal: the embedded server's address when it runs here.
    target: Target
    task_queue: str
    #: The embedded server, when this process started it.
    server: EmbeddedServer | None = None
    #: The worker of this process, when it runs one.
    worker: CodeModeWorker | None = None
    #: Whether another process's worker polls the task queue.
    workers_elsewhere: bool = False

    @property
    def address(self) -> str:
        return self.target.address

    @property
    def own_worker(self) -> bool:
        return self.worker is not None

    @property
    def ui_url(self) -> str | None:
        """The web UI, when this process started the embedded server (else unknown here)."""
        return self.server.ui_url if self.server is not None else None

    def flags(self) -> str:
        """The connection flags of the commands shown to a person (``Target.flags``)."""
        return self.target.flags()


@contextlib.asynccontextmanager
async def open_backend(
    target: Target,
    *,
    task_queue: str,
    tools: Tools | None = None,
    note: Callable[[str], None] = log.warning,
) -> AsyncIterator[Backend]:
    """The client, and whatever this process must run itself, for as long as the block runs.

    ``tools``: what a worker of this process would serve; without them (or when another worker
    polls the queue) none runs here, and nothing is embedded. When this process runs the
    worker, it starts the MCP servers of ``tools`` (if not yet) and the worker closes them;
    otherwise servers ``tools`` had started are closed here. ``note``: where the lines a person
    reads go (what was started)."""
    servable = tools is not None and tools.servable
    async with contextlib.AsyncExitStack() as stack:
        server = None
        if server_answers(target.address):
            client = await connect_to(target, probed=True)
            elsewhere = await has_workers(client, task_queue)
        else:
            if not target.may_embed:
                raise NoServerAnswers(target, embedding_refused(target))
            if not servable:
                raise NothingToServe(target)
            server = await start_embedded(split_address(target.address)[1], namespace=target.namespace, note=note)
            stack.push_async_callback(server.stop)
            note(f"No Temporal server at {target.address}: started the embedded one (UI {server.ui_url}, db {server.db}).")
            target = local_target(server.address, target.namespace)
            client = await connect_to(target, probed=True)
            elsewhere = False
        worker = None
        if not elsewhere and servable:
            assert tools is not None
            worker = await _run_worker(stack, client, tools, task_queue, note)
        elif tools is not None:
            await tools.aclose()  # (started only to list their tools)
        yield Backend(client, target, task_queue, server=server, worker=worker, workers_elsewhere=elsewhere)


async def _run_worker(
    stack: contextlib.AsyncExitStack, client: Client, tools: Tools, task_queue: str, note: Callable[[str], None]
) -> CodeModeWorker:
    from codemode.worker.worker import CodeModeWorker

    note(f"No worker polls task queue {task_queue!r}: running one in this process.")
    # Tool failures reach the person as call lines or results; the worker's tracebacks are noise here.
    for name in ("temporalio.activity", "temporalio.workflow"):
        logging.getLogger(name).setLevel(logging.ERROR)
    registry = await tools.start_mcp()
    stack.push_async_callback(tools.aclose)  # the worker closes them too; twice is harmless
    worker = CodeModeWorker(client, registry, task_queue=task_queue, mcp=tools.mcp_servers)
    await stack.enter_async_context(worker.running())
    return worker


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
    started right after one (a client restarting ``codemode mcp``) must not count on it. (A
    worker's identity may go on after a space: ``codemode-approvers=<hash>``, issue 45.)"""
    pid, _, host = (identity.split() or [""])[0].partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False
