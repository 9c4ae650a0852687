"""Temporal for the MCP server, standing on its own like ``codemode run``: the server at
``TEMPORAL_ADDRESS`` when one answers, else the embedded one (a local address only), and a
worker in this process when none polls the task queue. Both live as long as the MCP server.

Everything here writes to stderr: on stdio, stdout is the MCP channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from codemode.activities.tools import ToolRegistry
from codemode.apps.cli.common import Fail, command_target, note, open_client, start_server
from codemode.worker.connection import (
    DEFAULT_ADDRESS,
    connect,
    embedding_refused,
    has_workers,
    local_target,
    server_answers,
    split_address,
)


@dataclass
class Backend:
    client: Client
    #: The address clients reach Temporal at (the embedded server's, when it runs here).
    address: str
    task_queue: str
    #: The web UI, when this process started the embedded server (else unknown here).
    ui_url: str | None = None
    #: Whether a worker runs in this process.
    own_worker: bool = False
    #: The connection flags of the commands shown to a person (None: from ``address``).
    flags: str | None = None

    @property
    def address_flag(self) -> str:
        """`` --address X`` (and the namespace and profile when configured) for the commands
        shown to a person, unless they are the defaults; never an API key."""
        if self.flags is not None:
            return self.flags
        return "" if self.address == DEFAULT_ADDRESS else f" --address {self.address}"


@contextlib.asynccontextmanager
async def open_backend(
    address: str, registry: ToolRegistry, *, task_queue: str, mcp: Any = None
) -> AsyncIterator[Backend]:
    """The client (and whatever this process must run itself), for as long as the block runs.
    ``mcp``: the started MCP servers of ``--mcp-config`` (their tools are in ``registry``): the
    worker of this process uses and closes them; when another worker serves the queue, they
    were needed only to list their tools and are closed here."""
    from codemode.worker.worker import CodeModeWorker

    async with contextlib.AsyncExitStack() as stack:
        ui_url = None
        target = command_target(address)  # the command's connection flags over Temporal's configuration
        if server_answers(address):
            client = await open_client(address)
            own_worker = not await has_workers(client, task_queue)
        else:
            if not target.may_embed:
                raise Fail(f"no Temporal server answers at {target.describe()}{embedding_refused(target)}")
            server = await start_server(split_address(address)[1], None, None, namespace=target.namespace)
            stack.push_async_callback(server.stop)
            note(f"No Temporal server at {address}: started the embedded one (UI {server.ui_url}, db {server.db}).")
            client = await connect(target=local_target(server.address, target.namespace))
            address, ui_url, own_worker = server.address, server.ui_url, True
        if own_worker:
            note(f"No worker polls task queue {task_queue!r}: running one in this process.")
            # Tool failures reach the model in the results; the worker's tracebacks are noise here.
            for name in ("temporalio.activity", "temporalio.workflow"):
                logging.getLogger(name).setLevel(logging.ERROR)
            worker = CodeModeWorker(client, registry, task_queue=task_queue, mcp=mcp)
            await stack.enter_async_context(worker.running())
        elif mcp is not None:
            await mcp.aclose()
        flags = None if ui_url else target.flags()  # (the embedded server's: its address alone)
        yield Backend(
            client=client, address=address, task_queue=task_queue, ui_url=ui_url, own_worker=own_worker, flags=flags
        )


class BackendSlot:
    """The backend as it comes up: the MCP server answers its client at once (listing tools
    needs no Temporal) while the embedded server and the worker start; calls that need
    Temporal wait here, or get the reason it could not start."""

    def __init__(self, backend: Backend | None = None) -> None:
        self._future: asyncio.Future[Backend] = asyncio.get_running_loop().create_future()
        if backend is not None:
            self._future.set_result(backend)

    async def get(self) -> Backend:
        return await asyncio.shield(self._future)

    @property
    def ready(self) -> Backend | None:
        return self._future.result() if self._future.done() and not self._future.exception() else None

    async def run(
        self, address: str, registry: ToolRegistry, *, task_queue: str, stop: asyncio.Event, mcp: Any = None
    ) -> None:
        """Open the backend, offer it until ``stop`` is set, then close it."""
        try:
            async with open_backend(address, registry, task_queue=task_queue, mcp=mcp) as backend:
                self._future.set_result(backend)
                await stop.wait()
        except BaseException as err:
            if not self._future.done():
                message = getattr(err, "message", None) or f"{type(err).__name__}: {err}"
                note(f"error: {message}")
                self._future.set_exception(BackendUnavailable(message))
            if not isinstance(err, Exception):
                raise


class BackendUnavailable(RuntimeError):
    """Temporal could not be reached or started for this server."""
