"""What the framework examples share: a worker with both plugins (``CodeModePlugin`` and the
framework's own), the agent workflow started, the approval its code waits for printed with the
command that decides it, and the agent's answer once a person has."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Sequence
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from codemode.client.following import query_status

TOOLS = "examples.tools"
PROMPT = "Email ana@example.com tomorrow's forecast for Paris."
#: What each example's scripted model writes for run_code.
CODE = """\
forecast = await get_forecast("Paris", days=1)
sent = send_email(to="ana@example.com", subject="Paris tomorrow", body=f"{forecast[0]['temp_c']}C")
{"temp_c": forecast[0]["temp_c"], "sent": sent["sent"]}"""


async def run_agent(name: str, workflow: Any, plugins: Sequence[Any], *, call_id: str = "call-1") -> None:
    """Run the agent workflow ``workflow`` on a worker of this process until it answers."""
    address = os.environ.get("TEMPORAL_ADDRESS", "localhost:7233")
    client = await Client.connect(address, plugins=list(plugins))
    task_queue = os.environ.get("CODEMODE_TASK_QUEUE", f"{name}-agents")
    async with Worker(client, task_queue=task_queue, workflows=[workflow]):
        agent_id = f"{name}-{uuid.uuid4().hex[:8]}"
        handle = await client.start_workflow(workflow.run, PROMPT, id=agent_id, task_queue=task_queue)
        print(f"> {PROMPT}", flush=True)
        # The agent's run_code started the execution as its child: {agent id}-run_code-{call id}.
        execution_id = f"{agent_id}-run_code-{call_id}"
        while True:
            try:
                status = await query_status(client.get_workflow_handle(execution_id))
            except Exception:  # noqa: BLE001 (not started yet)
                status = None
            if status is not None and status.state == "awaiting_approval":
                break
            await asyncio.sleep(0.2)
        for call in status.pending_approvals:
            print(f"waits for a person: {call.summary}", flush=True)
        print(f"approve: codemode approve {execution_id} --all --by NAME", flush=True)
        print(await handle.result(), flush=True)
