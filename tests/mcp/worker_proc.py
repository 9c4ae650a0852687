"""A worker with MCP servers in its own process, so a test can SIGKILL it:
python tests/mcp/worker_proc.py ADDRESS TASK_QUEUE MCP_CONFIG_FILE"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.mcp_tools import McpServers  # noqa: E402
from codemode.worker.connection import connect
from codemode.worker.worker import CodeModeWorker  # noqa: E402


async def main(address: str, task_queue: str, config: str) -> None:
    client = await connect(address)
    servers = await McpServers(config).start()
    worker = CodeModeWorker(client, ToolRegistry(), task_queue=task_queue, mcp=servers)
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
