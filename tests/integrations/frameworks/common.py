"""What the framework tests share: the code the scripted models send to ``run_code`` (a lookup,
then a transfer that needs a person's approval), waiting for the execution to park, a
person's decision through ``codemode approve``/``deny``, how many times a tool ran, and the
whole path of an agent workflow whose ``run_code`` waits for that person
(``agent_waits_for_the_person``)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from codemode.client.following import query_status
from tests.cli.runner import codemode
from tests.workflows.conftest import read_events

TOOLS = "tests.workflows.tools_under_test"
CODE = "w = lookup('Paris')\nr = transfer('ana', 12.5)\n{'city': w['city'], 'paid': r['amount']}"


async def wait_parked(client: Client, execution_id: str, tries: int = 600) -> list[str]:
    """Wait until ``execution_id`` waits for a person, durably: the worker says so (a query)
    and the history has it (the memo, what ``codemode approve --all`` reads with no worker
    running; a query may answer from a workflow task not yet completed). The tools it waits on."""
    handle = client.get_workflow_handle(execution_id)
    for _ in range(tries):
        try:
            status = await query_status(handle)
            recorded = await (await handle.describe()).memo_value("pending_approvals", None)
        except Exception:  # noqa: BLE001 (not started yet)
            status, recorded = None, None
        if status is not None and status.state == "awaiting_approval" and recorded:
            return [p.tool for p in status.pending_approvals]
        await asyncio.sleep(0.1)
    raise AssertionError(f"{execution_id} never parked on its approval")


async def decide(temporal_address: str, execution_id: str, *, approve: bool = True) -> None:
    """A person decides every pending call, with the CLI."""
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address}
    verb = "approve" if approve else "deny"
    done = await codemode(verb, execution_id, "--all", "--by", "ana", env=env)
    assert done.rc == 0, done


def transfers(events: Path) -> int:
    """How many times ``transfer`` ran."""
    return len([e for e in read_events(events) if e["tool"] == "transfer" and e["event"] == "start"])


def tool_output(text: str) -> dict:
    """The run_code result a final message quotes (``done: {...}``)."""
    return json.loads(text.split("done: ", 1)[1])


async def agent_waits_for_the_person(
    workflow: Any,
    plugins: list,
    *,
    prefix: str,
    temporal_address: str,
    task_queue: str,
    events_file: Path,
    approve: bool = True,
    prompt: str = "pay ana",
    call_id: str = "call-1",
    parent_checked: bool = True,
) -> dict:
    """An agent ``workflow`` (its ``run`` takes the prompt) on a worker with ``plugins`` that
    keeps no workflow cached (every task replays): its ``run_code`` child parks on the
    transfer, a person decides with the CLI, and the agent's answer quotes the result (the
    transfer ran once when approved, never when denied). The history then replays under the
    same plugins. The run_code result."""
    client = await Client.connect(temporal_address, plugins=plugins)
    agent_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    child_id = f"{agent_id}-run_code-{call_id}"
    async with Worker(client, task_queue=task_queue, workflows=[workflow], max_cached_workflows=0):
        handle = await client.start_workflow(workflow.run, prompt, id=agent_id, task_queue=task_queue)
        assert await wait_parked(client, child_id) == ["transfer"]
        if parent_checked:
            assert (await client.get_workflow_handle(child_id).describe()).parent_id == agent_id
        await decide(temporal_address, child_id, approve=approve)
        answer = await handle.result()
    result = tool_output(answer)
    assert result["execution_id"] == child_id
    if approve:
        assert result["success"] is True and result["output"] == {"city": "Paris", "paid": 12.5}
        assert transfers(events_file) == 1
    else:  # the code saw PermissionError, and so does the model
        assert result["success"] is False and result["error"]["type"] == "PermissionError", result
        assert transfers(events_file) == 0
    await Replayer(workflows=[workflow], plugins=plugins).replay_workflow(await handle.fetch_history())
    return result
