"""One worker process for ``bench/monday.py``: ours (a ``CodeModeWorker`` with
``bench.monday_tools``) or the floor (a bare workflow that waits for an ``approve`` signal,
then runs one activity), so the benchmark can read its memory and CPU apart from the client's
and restart it while runs wait.

    python -m bench.monday_worker ADDRESS TASK_QUEUE ours|floor
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker

from bench.monday_floor import ParkedWorkflow
from bench.monday_tools import record


@activity.defn(name="bench_monday_release")
async def release(i: int) -> int:
    record()
    return i


async def main() -> None:
    address, task_queue, kind = sys.argv[1:4]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    if kind == "ours":
        from codemode.activities import ToolRegistry
        from codemode.worker.converter import data_converter, default_store
        from codemode.worker.worker import CodeModeWorker

        client = await Client.connect(address, data_converter=data_converter(await default_store()))
        worker = CodeModeWorker(
            client, ToolRegistry.from_module("bench.monday_tools"), task_queue=task_queue, notify=None, approvers=None
        )
        async with worker.running():
            print("ready", flush=True)
            await stop.wait()
    else:
        client = await Client.connect(address)
        async with Worker(
            client,
            task_queue=task_queue,
            workflows=[ParkedWorkflow],
            activities=[release],
            max_concurrent_activities=200,
            # the same cache as ours (``bench/monday.py --max-cached``)
            max_cached_workflows=int(os.environ.get("CODEMODE_MAX_CACHED_WORKFLOWS") or 1000),
        ):
            print("ready", flush=True)
            await stop.wait()


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
