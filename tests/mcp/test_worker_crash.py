"""SIGKILL a worker whose tools are an MCP server's while a call is in flight: a new worker
(with its own server process) finishes the run, and no call that completed is sent again."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest

from .servers import fault_events, fault_server

ROOT = Path(__file__).resolve().parents[2]
CODE = "out = []\nfor i in range(5):\n    out.append(faults.lookup(key=str(i), seconds=0.4))\nout\n"


def spawn(address: str, task_queue: str, config: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/mcp/worker_proc.py"), address, task_queue, str(config)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


async def test_sigkill_worker_mid_mcp_call(client, temporal_address, tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"faults": fault_server(events, timeout=3)}})
    )  # a lost attempt times out soon
    task_queue = f"mcp-crash-{uuid.uuid4().hex[:6]}"
    first = spawn(temporal_address, task_queue, config)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # two calls done, the third in flight
            got = fault_events(events)
            done = [e["key"] for e in got if e["event"] == "lookup-done"]
            if len(done) >= 2 and [e for e in got if e["event"] == "lookup" and e["key"] not in done]:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError(f"the run never got going: {fault_events(events)}")
        first.send_signal(signal.SIGKILL)
        first.wait()
        completed = set(done)
        second = spawn(temporal_address, task_queue, config)
        outcome = await asyncio.wait_for(handle.result(), 90)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert outcome.output == [f"value of {i}" for i in range(5)]
    sent = [e["key"] for e in fault_events(events) if e["event"] == "lookup"]
    for key in completed:
        assert sent.count(key) == 1, sent  # a completed call is never sent again
    assert sorted(set(sent)) == ["0", "1", "2", "3", "4"]
    assert len(sent) <= 6  # at most the call in flight at the kill went twice
