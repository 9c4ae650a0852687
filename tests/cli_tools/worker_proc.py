"""A worker with CLI tools in its own process, so a test can SIGKILL it:
python tests/cli_tools/worker_proc.py ADDRESS TASK_QUEUE CLI_CONFIG_FILE"""

from __future__ import annotations

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.cli_tools import CliTools  # noqa: E402
from codemode.worker.client.connection import connect  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402


async def main(address: str, task_queue: str, config: str) -> None:
    client = await connect(address)
    registry = ToolRegistry().include(CliTools(config).start().tool_specs())
    worker = CodeModeWorker(client, registry, task_queue=task_queue)
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
