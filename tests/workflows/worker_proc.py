"""A worker in its own process, so a test can SIGKILL it: python tests/workflows/worker_proc.py ADDRESS TASK_QUEUE"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from codemode.activities import ToolRegistry  # noqa: E402
from codemode.worker.connection import connect
from codemode.worker.worker import CodeModeWorker  # noqa: E402


async def main(address: str, task_queue: str) -> None:
    client = await connect(address)
    registry = ToolRegistry.from_module("tests.workflows.tools_under_test")
    worker = CodeModeWorker(client, registry, task_queue=task_queue, keep_alive_seconds=float(os.environ.get("KEEP_ALIVE", "60")))
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
