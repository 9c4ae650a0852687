"""What the framework tests share: the code the scripted models send to ``run_code`` (a lookup,
then a transfer that needs a person's approval), waiting for the execution to park, a
person's decision through ``codemode approve``/``deny``, and how many times a tool ran."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from temporalio.client import Client

from codemode.worker.client.following import query_status
from tests.cli.runner import codemode
from tests.workflows.conftest import read_events

TOOLS = "tests.workflows.tools_under_test"
CODE = "w = lookup('Paris')\nr = transfer('ana', 12.5)\n{'city': w['city'], 'paid': r['amount']}"


async def wait_parked(client: Client, execution_id: str, tries: int = 600) -> list[str]:
    """Wait until ``execution_id`` waits for a person; the tools it waits on."""
    handle = client.get_workflow_handle(execution_id)
    for _ in range(tries):
        try:
            status = await query_status(handle)
        except Exception:  # noqa: BLE001 (not started yet)
            status = None
        if status is not None and status.state == "awaiting_approval":
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
