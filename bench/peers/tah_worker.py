"""The peer's side of the peers benchmark, in its own environment: a worker for
temporal-agent-harness's code mode and the agents that drive it, answering the benchmark's
commands (one JSON object a line on stdin, one answer a line on stdout).

    bench/.venv-peers/bin/python -m bench.peers.tah_worker ADDRESS

Commands: ``worker`` (restart the worker with a workflow cache size, an eviction period and
the tools' delay), ``phase`` (agents running scripts back to back: wall time, latencies,
workflow ids, calls counted per id), ``one`` (one script, with a timeout: its output or how
it failed), ``approval`` (a script whose call waits for a person: what the harness does),
``quit``. Imports nothing of ``codemode``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
import traceback
import uuid
from typing import Any

from temporal_agent_harness.harness.agent_protocol import (
    AGENT_STATUS_QUERY,
    TOOL_APPROVAL_UPDATE,
    AgentConfig,
    AgentStatus,
    ToolApprovalDecision,
)
from temporal_agent_harness.plugin import AgentHarnessPlugin
from temporalio.client import Client
from temporalio.worker import Worker

from bench.peers import tool_hooks
from bench.peers.stuck_runs import stuck
from bench.peers.tah_agent import TOOLS, HarnessCodeMode, Script


class Peer:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.task_queue = f"tah-{uuid.uuid4().hex[:6]}"
        self.worker: Worker | None = None
        self.task: asyncio.Task[None] | None = None

    async def restart(self, max_cached: int | None, evict_every: int, delay: float) -> None:
        await self.stop()
        tool_hooks.delay, tool_hooks.evict_every = delay, evict_every
        kwargs: dict[str, Any] = {} if max_cached is None else {"max_cached_workflows": max_cached}
        self.worker = Worker(
            self.client,
            task_queue=self.task_queue,
            workflows=[HarnessCodeMode],
            max_concurrent_activities=200,
            **kwargs,
        )
        tool_hooks.worker = self.worker
        self.task = asyncio.create_task(self.worker.run())
        await asyncio.sleep(0.2)

    async def stop(self) -> None:
        if self.worker is not None:
            with contextlib.suppress(Exception):
                await self.worker.shutdown()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self.task  # type: ignore[misc]
            self.worker = None

    async def run_one(self, script: str, wid: str | None = None) -> tuple[str, str]:
        wid = wid or f"tah-{uuid.uuid4().hex[:12]}"
        handle = await self.client.start_workflow(
            HarnessCodeMode.run, args=[AgentConfig(), Script(script=script)], id=wid, task_queue=self.task_queue
        )
        return wid, await handle.result()

    async def phase(self, agents: list[list[str]]) -> dict[str, Any]:
        latencies: list[float] = []
        ids: list[str] = []
        errors: list[str] = []

        async def agent(scripts: list[str]) -> None:
            for script in scripts:
                t0 = time.perf_counter()
                try:
                    wid, out = await self.run_one(script)
                except Exception as err:  # noqa: BLE001 - reported to the benchmark
                    errors.append(f"{type(err).__name__}: {err}")
                    continue
                latencies.append(time.perf_counter() - t0)
                ids.append(wid)
                if out.startswith("Script error"):
                    errors.append(out[:300])

        tool_hooks.reset()
        t0 = time.perf_counter()
        await asyncio.gather(*(agent(a) for a in agents))
        wall = time.perf_counter() - t0
        return {
            "wall": wall,
            "latencies": latencies,
            "ids": ids,
            "errors": errors[:5],
            "n_errors": len(errors),
            "calls": dict(tool_hooks.calls),
            "evictions": tool_hooks.evictions,
        }

    async def one(self, script: str, timeout: float, timed: bool) -> dict[str, Any]:
        tool_hooks.reset()
        wid = f"tah-{uuid.uuid4().hex[:12]}"
        if timed:
            tool_hooks.timed.add(wid)
        t0 = time.perf_counter()
        try:
            _, out = await asyncio.wait_for(self.run_one(script, wid), timeout)
            ok, what = not out.startswith("Script error"), out
        except TimeoutError:
            ok, what = False, f"no result after {timeout:.0f} s{await stuck(self.client, wid)}"
        except Exception as err:  # noqa: BLE001
            ok, what = False, f"{type(err).__name__}: {err}"
        return {
            "ok": ok,
            "output": what[-600:],
            "seconds": time.perf_counter() - t0,
            "id": wid,
            "calls": tool_hooks.calls.get(wid, 0),
            "times": tool_hooks.times.get(wid, []),
        }

    async def approval(self, script: str) -> dict[str, Any]:
        """A call the harness's policy gates: wait until it is pending, evict the run while it
        waits (what a restart or a full cache does), approve it, and wait for the result."""
        tool_hooks.reset()
        wid = f"tah-{uuid.uuid4().hex[:12]}"
        t0 = time.perf_counter()
        handle = await self.client.start_workflow(
            HarnessCodeMode.run, args=[AgentConfig(), Script(script=script)], id=wid, task_queue=self.task_queue
        )
        while True:
            status = await handle.query(AGENT_STATUS_QUERY, result_type=AgentStatus)
            if status.pending_approvals:
                break
            await asyncio.sleep(0.1)
        before = status.pending_approvals[0].tool_id
        desc = await handle.describe()
        tool_hooks.evict(desc.run_id or "")
        await asyncio.sleep(1.0)
        status = await handle.query(AGENT_STATUS_QUERY, result_type=AgentStatus)
        after = status.pending_approvals[0].tool_id if status.pending_approvals else None
        notes = []
        try:
            await handle.execute_update(TOOL_APPROVAL_UPDATE, ToolApprovalDecision(tool_id=before, approved=True))
            notes.append("the id shown before the eviction approved it")
        except Exception as err:  # noqa: BLE001 - what the harness does is the finding
            notes.append(f"the id shown before the eviction was refused ({getattr(err, 'cause', err)})")
            if after is not None:
                await handle.execute_update(TOOL_APPROVAL_UPDATE, ToolApprovalDecision(tool_id=after, approved=True))
                notes.append("the id shown after it approved it")
        out = await asyncio.wait_for(handle.result(), 120)
        return {
            "ok": not out.startswith("Script error"),
            "seconds": time.perf_counter() - t0,
            "calls": tool_hooks.calls.get(wid, 0),
            "output": f"waits in the workflow's approval gate, the Monty dump in the workflow's memory; evicted while "
            f"waiting, the replay re-ran the script to the gate and the pending call's id "
            f"{'stayed the same' if after == before else 'changed'}; " + "; ".join(notes) + f": {out[-160:]}",
        }


def protocol_stream() -> Any:
    """The answers' channel: this process's stdout as it was started; anything else that
    writes to stdout (a library's print, native code) goes to stderr instead."""
    fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(fd, "w", buffering=1)


async def main() -> None:
    out = protocol_stream()
    address = sys.argv[1]
    client = await Client.connect(address, plugins=[AgentHarnessPlugin(tools=TOOLS)])
    peer = Peer(client)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 28)  # a phase command carries every script
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True, "task_queue": peer.task_queue}), file=out, flush=True)
    while line := await reader.readline():
        cmd = json.loads(line)
        try:
            kind = cmd["cmd"]
            if kind == "quit":
                break
            if kind == "worker":
                await peer.restart(cmd.get("max_cached"), cmd.get("evict_every", 0), cmd.get("delay", 0.005))
                answer: dict[str, Any] = {"ok": True}
            elif kind == "phase":
                answer = await peer.phase(cmd["agents"])
            elif kind == "approval":
                answer = await peer.approval(cmd["script"])
            elif kind == "one":
                answer = await peer.one(cmd["script"], cmd.get("timeout", 300), cmd.get("timed", False))
            else:
                answer = {"error": f"unknown command {kind!r}"}
        except Exception:  # noqa: BLE001
            answer = {"error": traceback.format_exc()[-2000:]}
        print(json.dumps(answer), file=out, flush=True)
    await peer.stop()


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
