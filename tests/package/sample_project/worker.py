"""A worker for the user's workflow and activity, with code mode added by its plugin."""

import asyncio
import os

from temporalio.client import Client
from temporalio.worker import Worker

from activities import compose_greeting
from codemode import CodeModePlugin
from workflows import ReportWorkflow

TASK_QUEUE = "samples"


async def main() -> None:
    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"), plugins=[CodeModePlugin(tools="tools")])
    worker = Worker(client, task_queue=TASK_QUEUE, workflows=[ReportWorkflow], activities=[compose_greeting])
    print("worker ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    asyncio.run(main())
