"""``codemode worker``, ``codemode server`` and ``codemode dev``: the long-running processes,
each until Ctrl-C or SIGTERM."""

from __future__ import annotations

import asyncio
import signal

import click
from temporalio.client import Client

from activities.tools import ToolRegistry
from worker.cli.common import (
    EXIT_OK,
    address_option,
    db_option,
    load_tools,
    note,
    open_client,
    port_option,
    require_tools,
    start_server,
    task_queue_option,
    tools_option,
    ui_port_option,
)
from worker.client import connect
from worker.server import EmbeddedServer


async def until_stopped() -> None:
    """Wait for SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def server_banner(server: EmbeddedServer) -> list[str]:
    return [
        f"Temporal server: {server.address}",
        f"Web UI:          {server.ui_url}",
        f"Database:        {server.db}",
    ]


async def _serve_worker(client: Client, registry: ToolRegistry, task_queue: str, address: str) -> None:
    from worker.worker import CodeModeWorker

    w = CodeModeWorker(client, registry, task_queue=task_queue)
    async with w.running():
        note(f"Worker ready on task queue {task_queue!r} at {address}; tools: {', '.join(registry.names)}")
        await until_stopped()
        note("Stopping the worker...")


@click.command()
@tools_option
@address_option
@task_queue_option
def worker(tools_module: str | None, address: str, task_queue: str) -> int:
    """Run a worker for the workflow, the sandbox steps and the tools, until Ctrl-C."""
    registry = load_tools(require_tools(tools_module))
    return asyncio.run(_worker(registry, address, task_queue))


async def _worker(registry: ToolRegistry, address: str, task_queue: str) -> int:
    client = await open_client(address)
    await _serve_worker(client, registry, task_queue, address)
    return EXIT_OK


@click.command()
@port_option
@ui_port_option
@db_option
def server(port: int, ui_port: int | None, db: str | None) -> int:
    """Run the embedded Temporal dev server (SQLite, web UI) until Ctrl-C."""
    return asyncio.run(_server(port, ui_port, db))


async def _server(port: int, ui_port: int | None, db: str | None) -> int:
    srv = await start_server(port, ui_port, db)
    try:
        for line in server_banner(srv):
            note(line)
        note("Ready. Ctrl-C to stop.")
        await until_stopped()
    finally:
        await srv.stop()
    return EXIT_OK


@click.command()
@tools_option
@port_option
@ui_port_option
@db_option
@task_queue_option
def dev(tools_module: str | None, port: int, ui_port: int | None, db: str | None, task_queue: str) -> int:
    """The embedded server and a worker in one process, until Ctrl-C."""
    registry = load_tools(require_tools(tools_module))
    return asyncio.run(_dev(registry, port, ui_port, db, task_queue))


async def _dev(registry: ToolRegistry, port: int, ui_port: int | None, db: str | None, task_queue: str) -> int:
    srv = await start_server(port, ui_port, db)
    try:
        for line in server_banner(srv):
            note(line)
        client = await connect(srv.address)
        await _serve_worker(client, registry, task_queue, srv.address)
    finally:
        await srv.stop()
    return EXIT_OK
