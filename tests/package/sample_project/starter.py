"""Start the user's workflow and print its result."""

import asyncio
import os
import sys

from temporalio.client import Client

from codemode import CodeModePlugin
from workflows import ReportWorkflow


async def main(city: str) -> None:
    client = await Client.connect(os.environ.get("TEMPORAL_ADDRESS", "localhost:7233"), plugins=[CodeModePlugin()])
    result = await client.execute_workflow(ReportWorkflow.run, city, id=f"report-{city}", task_queue="samples")
    print(result)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
