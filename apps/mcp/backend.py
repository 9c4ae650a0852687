"""Temporal for the MCP server, standing on its own like ``codemode run``: the client library's
``open_backend`` (the server at ``TEMPORAL_ADDRESS`` when one answers, else the embedded one,
a local address only; a worker in this process when none polls the task queue), held for as
long as the MCP server runs.

Everything here writes to stderr: on stdio, stdout is the MCP channel."""

from __future__ import annotations

import asyncio

from codemode.apps.command_line import note
from codemode.client.backend import Backend, open_backend
from codemode.worker.connection import Target
from codemode.worker.tool_sources import Tools


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

    async def run(self, target: Target, tools: Tools, *, task_queue: str, stop: asyncio.Event) -> None:
        """Open the backend, offer it until ``stop`` is set, then close it. The worker of this
        process (if it runs one) uses and closes the MCP servers ``tools`` started; when another
        worker serves the queue, they were needed only to list their tools and are closed."""
        try:
            async with open_backend(target, task_queue=task_queue, tools=tools, note=note) as backend:
                self._future.set_result(backend)
                await stop.wait()
        except BaseException as err:
            if not self._future.done():
                message = getattr(err, "message", None) or (
                    str(err) if isinstance(err, RuntimeError | ValueError) else f"{type(err).__name__}: {err}"
                )
                note(f"error: {message}")
                self._future.set_exception(BackendUnavailable(message))
            if not isinstance(err, Exception):
                raise


class BackendUnavailable(RuntimeError):
    """Temporal could not be reached or started for this server."""
