"""MCP-as-tools tests: real MCP servers (the npm reference servers, and ``fault_server.py``
built with the SDK's own server) behind a real worker on the session's dev server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from temporalio.client import Client

from codemode.activities import ToolRegistry
from codemode.activities.mcp_tools import McpServers
from codemode.worker.worker import CodeModeWorker


@contextlib.asynccontextmanager
async def mcp_worker(
    client: Client, servers: dict[str, Any], *, tools_module: str | None = None, **worker_options: Any
) -> AsyncIterator[CodeModeWorker]:
    """A worker whose tools are the MCP servers' (and a module's), on a task queue of its own
    (``worker.task_queue``); the servers are started first and closed with the worker."""
    mcp = McpServers({"mcpServers": servers})
    await mcp.start()
    registry = ToolRegistry.from_module(tools_module) if tools_module else ToolRegistry()
    worker = CodeModeWorker(client, registry, task_queue=f"mcp-{uuid.uuid4().hex[:8]}", mcp=mcp, **worker_options)
    async with worker.running():
        yield worker
