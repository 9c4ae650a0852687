"""Faults of a real MCP server (``fault_server.py``, the SDK's own server over stdio): killed
mid-call, refusing to start, answering with errors, too slow for a cancelled execution.
What the code sees, what is retried, and what the server received."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import mcp_worker
from .servers import fault_events, fault_server


class Events:
    """The server's events file, read from where the current test began (one server, and
    one events file, serve the whole module: the SDK's import alone takes seconds)."""

    def __init__(self, path: Path, flag: Path) -> None:
        self.path = path
        self.flag = flag
        self.start = 0

    def mark(self) -> None:
        self.start = len(fault_events(self.path))

    def read(self) -> list[dict]:
        return fault_events(self.path)[self.start :]

    async def wait_for(self, match, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.read():
                if match(e):
                    return e
            await asyncio.sleep(0.02)
        raise AssertionError(f"no such event in {self.read()}")


@pytest.fixture(scope="module")
def module_events(tmp_path_factory: pytest.TempPathFactory) -> Events:
    root = tmp_path_factory.mktemp("faults")
    return Events(root / "events.jsonl", root / "fail-next-start")


@pytest.fixture(scope="module")
async def faults_worker(client, module_events: Events):
    server = fault_server(module_events.path)
    server["env"]["FAULT_FAIL_START"] = str(module_events.flag)
    async with mcp_worker(client, {"faults": server}) as worker:
        yield worker


@pytest.fixture
def events(module_events: Events, faults_worker: CodeModeWorker) -> Events:
    module_events.mark()
    return module_events


KILLED = """
a = faults.lookup(key="k1", seconds=2)
try:
    faults.append(line="x", seconds=2)
    err = None
except OSError as e:
    err = str(e)
b = faults.lookup(key="k2")
[a, err, b]
"""


async def test_server_killed_mid_call(client, faults_worker, events: Events) -> None:
    """The server dies under an idempotent call (retried on a restarted server) and under a
    non-idempotent one (not sent again: the code gets OSError), then serves the next call."""
    worker = faults_worker
    starts_before = worker.mcp.pool.starts["faults"]
    handle = await start_execution(client, CodeExecutionRequest(code=KILLED), task_queue=worker.task_queue)
    for kind in ("lookup", "append"):
        e = await events.wait_for(lambda e, k=kind: e["event"] == k)
        os.kill(e["pid"], signal.SIGKILL)
    outcome = await asyncio.wait_for(handle.result(), 60)
    starts = worker.mcp.pool.starts["faults"] - starts_before
    assert outcome.success, outcome.error
    a, err, b = outcome.output
    assert a == "value of k1" and b == "value of k2"
    assert err.startswith("mcp:faults/append: the connection to MCP server 'faults' ended during the call")
    assert "not idempotent" in err and "not sent again" in err
    received = events.read()
    assert [e["key"] for e in received if e["event"] == "lookup"] == ["k1", "k1", "k2"]
    assert [e["line"] for e in received if e["event"] == "append"] == ["x"]  # exactly one request
    assert starts == 2  # restarted after each death
    lookup, append, _ = outcome.tool_calls
    assert (lookup.status, lookup.attempts) == ("ok", 2)
    assert (append.status, append.attempts, append.error.type) == ("error", 1, "OSError")


async def test_a_call_that_was_never_sent_is_retried_even_when_not_idempotent(
    client, faults_worker, events: Events
) -> None:
    """The server died while idle and its restart fails once: the call was provably never
    sent, so a non-idempotent tool is retried, and the server receives it once."""
    worker = faults_worker
    await asyncio.wait_for(worker.mcp.pool.call_tool("faults", "lookup", {"key": "ping"}), 30)
    (ping,) = [e for e in events.read() if e["event"] == "lookup"]
    os.kill(ping["pid"], signal.SIGKILL)
    events.flag.touch()
    code = "faults.append(line='once')"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    assert outcome.output == "appended once"
    (call,) = outcome.tool_calls
    assert call.attempts == 2
    received = events.read()
    assert [e["event"] for e in received].count("refused-start") == 1
    (append,) = [e for e in received if e["event"] == "append"]
    assert append["key"] == f"{handle.id}/{call.call_id}"  # the idempotency key, in the request's _meta


ERRORS = """
import json
out = []
try:
    faults.fail(reason="no disk")
except RuntimeError as e:
    out.append(str(e))
try:
    faults.strict(n=3)
except ValueError as e:
    out.append(str(e))
try:
    faults.strict(n=json.loads('"three"'))  # passes the type check: only its value is wrong
except ValueError as e:
    out.append(str(e))
out.append(faults.strict(n=4))
out
"""


async def test_error_results_and_invalid_params_reach_the_code_unretried(client, faults_worker, events: Events) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=ERRORS), task_queue=faults_worker.task_queue)
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    failed, server_side, local, ok = outcome.output
    assert (
        failed == "mcp:faults/fail: Error executing tool fail: cannot do that: no disk"
    )  # isError, with the canonical id
    assert server_side == "mcp:faults/strict: n must be even, got 3"  # a JSON-RPC invalid-params error
    assert local == "faults.strict(): argument 'n': 'three' is not of type 'integer'"  # refused before sending
    assert ok == "2"
    fail, strict_odd, strict_str, strict_even = outcome.tool_calls
    assert (fail.status, fail.attempts, fail.error.type) == ("error", 1, "RuntimeError")
    assert (strict_odd.status, strict_odd.attempts, strict_odd.error.type) == ("error", 1, "ValueError")
    assert (strict_str.status, strict_str.attempts, strict_str.error.kind) == ("error", 0, "invalid_call")
    received = [(e["event"], e.get("n", e.get("reason"))) for e in events.read() if e["event"] in ("fail", "strict")]
    assert received == [("fail", "no disk"), ("strict", 3), ("strict", 4)]  # each once; "three" never sent


async def test_a_slow_call_is_cancelled_with_the_execution(client, faults_worker, events: Events) -> None:
    code = "faults.slow(seconds=60)"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=faults_worker.task_queue)
    await events.wait_for(lambda e: e["event"] == "slow")
    await handle.cancel()
    # The activity hears of it at its next heartbeat; the SDK cancels the request on the wire.
    await events.wait_for(lambda e: e["event"] == "slow-cancelled", timeout=20)
    status = (await handle.describe()).status
    for _ in range(100):
        if status.name != "RUNNING":
            break
        await asyncio.sleep(0.1)
        status = (await handle.describe()).status
    assert status.name == "CANCELED"
    assert not [e for e in events.read() if e["event"] == "slow-done"]
