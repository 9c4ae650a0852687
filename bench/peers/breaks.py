"""Where each system breaks (``--phases breaks``): one execution per test and system with a
large heap, many calls, a pandas import, and an approval that waits through an eviction."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client

from bench.peers import tool_hooks
from bench.peers.programs import APPROVAL_CODE, PANDAS_CODE, gathered_code, heap_code
from bench.peers.report import Config
from bench.peers.systems import AgentSystem, Harness, Ours, System
from codemode.client.executions import start_execution
from codemode.client.following import query_status, send_decision
from codemode.workflows.models import CodeExecutionRequest


async def run_breaks(
    args: argparse.Namespace, systems: list[System], delay: float, ours_shared: dict[str, Any], client: Client
) -> list[dict[str, Any]]:
    """One execution per test and system: what each does with a large heap, many calls, a
    pandas import and an approval that waits."""
    out: list[dict[str, Any]] = []
    cfg = Config("breaks")
    tests: list[tuple[str, str, float]] = [
        (f"heap {mb} MB", heap_code(mb), 120) for mb in map(int, args.heap_mb.split(","))
    ]
    tests += [(f"{k} calls", gathered_code(k), 1800) for k in map(int, args.most_calls.split(","))]
    tests.append(("pandas", PANDAS_CODE, 300))
    if Path("/usr/bin/python3").exists():  # the python runtime on an interpreter that has pandas (Debian's)
        from codemode.runtimes.python import PythonRuntime

        # numpy finds its BLAS through Debian's alternatives links, outside the jail's default mounts
        ours_shared["runtimes"] = {"python": PythonRuntime(python="/usr/bin/python3", ro_paths=["/etc/alternatives"])}
    for system in systems:
        if system.name in ("floor", "ours-agent"):
            continue
        await system.configure(cfg, delay)
        for test, code, timeout in tests:
            if test == "pandas" and system.name == "python" and not ours_shared.get("runtimes"):
                continue
            r = await system.one(code, timeout)
            r.update(test=test, system=system.name)
            out.append(r)
            print(
                f"break {test} {system.name}: {'ok' if r['ok'] else 'no'} {r['seconds']:.1f}s {r['calls']} calls: "
                f"{r['output'][-200:]!r}",
                flush=True,
            )
        r = await approval_that_waits(system, client)
        out.append(r)
        print(f"break approval {system.name}: {r}", flush=True)
    ours_shared.pop("runtimes", None)
    return out


async def approval_that_waits(system: System, client: Client) -> dict[str, Any]:
    """A call that waits for a person: the run is evicted while it waits, then approved."""
    base = {"test": "approval, evicted while waiting", "system": system.name, "calls": 0}
    if isinstance(system, Ours):
        system.activate()
        tool_hooks.reset()
        t0 = time.perf_counter()
        handle = await start_execution(
            client, CodeExecutionRequest(code=APPROVAL_CODE, runtime=system.runtime), task_queue=system.tq
        )
        while not ((s := await query_status(handle)) and s.pending_approvals):
            await asyncio.sleep(0.1)
        desc = await handle.describe()
        tool_hooks.evict(desc.run_id or "")
        await asyncio.sleep(1.0)
        await send_decision(handle, s.pending_approvals[0].call_id, approve=True, by="bench")
        out = await handle.result()
        return {
            **base,
            "ok": out.success,
            "seconds": time.perf_counter() - t0,
            "calls": sum(tool_hooks.calls.values()),
            "output": f"parked with nothing live; approved after an eviction: {out.output!r}",
        }
    if isinstance(system, Harness):
        r = await system.ask({"cmd": "approval", "script": APPROVAL_CODE})
        return {**base, **r}
    if isinstance(system, AgentSystem):
        r = await system.one(APPROVAL_CODE, 120)
        return {**base, **r, "test": "approval (a tool that requires approval)"}
    return {**base, "ok": False, "seconds": 0.0, "output": "n/a"}
