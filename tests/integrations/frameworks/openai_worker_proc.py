"""An OpenAI Agents SDK agent's worker, in a process a test can SIGKILL: ``OpenAIAgentsPlugin``
with the scripted model and ``CodeModePlugin``, every task replayed.

    python tests/integrations/frameworks/openai_worker_proc.py ADDRESS TASK_QUEUE"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

from temporalio.client import Client
from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
from temporalio.openai_agents.testing import TestModelProvider
from temporalio.worker import Worker

from codemode.worker.plugin import CodeModePlugin
from tests.integrations.frameworks.common import TOOLS
from tests.integrations.frameworks.openai_workflows import OpenAICoderWorkflow, quoting_model


async def main(address: str, task_queue: str) -> None:
    openai_agents = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30)),
        model_provider=TestModelProvider(quoting_model()),
    )
    client = await Client.connect(address, plugins=[CodeModePlugin(TOOLS), openai_agents])
    worker = Worker(client, task_queue=task_queue, workflows=[OpenAICoderWorkflow], max_cached_workflows=0)
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
