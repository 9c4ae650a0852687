"""The application's own worker, in a process a test can SIGKILL: its agent workflows plus code
mode through the plugins alone (no codemode CLI).

    python tests/integrations/durable_worker_proc.py ADDRESS TASK_QUEUE"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pydantic_ai.durable_exec.temporal import PydanticAIPlugin  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from codemode.worker.plugin import CodeModePlugin  # noqa: E402
from tests.integrations.durable_agent import CoderAgentWorkflow, SessionCoderAgentWorkflow  # noqa: E402


async def main(address: str, task_queue: str) -> None:
    plugins = [PydanticAIPlugin(), CodeModePlugin(tools="tests.workflows.tools_under_test")]
    client = await Client.connect(address, plugins=plugins)
    worker = Worker(client, task_queue=task_queue, workflows=[CoderAgentWorkflow, SessionCoderAgentWorkflow])
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
