"""Side by side with the peers: the same agent workload through our engine and the other
ways to run code mode on Temporal, on one dev server, in one run, as ratios to a floor
measured in the same run (the machine is noisy: only ratios mean something).

Systems (``--systems``, all by default):

* ``floor``: a bare workflow making the same calls as activities in the same groups;
* ``monty``, ``python``: our engine (``start_execution``), one execution per program;
* ``tah``: temporal-agent-harness 0.8's ``code_mode_tool`` (Monty stepped inside the agent's
  workflow, host calls as activity tools), in its own environment ``bench/.venv-peers`` (it
  pins pydantic-monty 1.0), driven as a subprocess against the same server;
* ``pah``: pydantic-ai-harness's ``CodeMode`` under pydantic-ai's ``TemporalDurability``
  (Monty in the agent's workflow code, nested calls as activities), with a scripted model
  whose two answers are activities too;
* ``ours-agent``: ours in that same agent (``DurableCodeMode``, each ``run_code`` a child
  execution), the like-for-like for ``pah``.

The workload: N agents at once, each sending programs it just wrote (``agent_code``: about 10
calls, loops, branches, helpers, gathered batches; never the same code twice), the tools
waiting ``--delay`` ms. Phases: the workload with the default workflow cache; with a cache of
``--cache`` runs (smaller than N); with each run evicted after every ``--evict-every`` calls
(the tool asks its worker's core to evict the run: its next task replays the history); one
execution of ``--long`` sequential calls (total time, and the last 100 calls against the first
100), with the default cache and evicted every ``--long-evict`` calls; and where each breaks
(``--breaks``: the largest heap, the most calls, a pandas import, an approval that waits).

Per system and phase: calls/s, CPU per call (this process and its children, the peer's worker
included, and the dev server), p95 latency per execution, history bytes per call.

    bench/.venv-peers/bin/python -V || python -m bench.peers --setup   # the peer's environment, once
    python -m bench.peers                    # N = 20, all phases, the breaks
    python -m bench.peers --quick            # N = 8, fewer runs, shorter long run, no breaks
    python -m bench.peers --agents 20 --runs 10 --systems floor,monty,tah
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client

from bench.agent_workload import Program
from bench.cpu import CPUMeter
from bench.history_bytes import measure
from bench.peers import systems as peer_systems
from bench.peers.breaks import run_breaks
from bench.peers.programs import program
from bench.peers.report import (
    Config,
    Measured,
    print_breaks_table,
    print_long_table,
    print_phase_table,
    write_json,
)
from bench.peers.systems import AgentSystem, Floor, Harness, Ours, System, setup_peer_venv
from codemode.activities import ToolRegistry
from codemode.runtimes.types import ExecutionLimits
from codemode.worker.converter import store_of
from codemode.worker.dev_server import start_local_environment
from codemode.worker.plugin import CodeModePlugin

BIG_LIMITS = ExecutionLimits(max_tool_calls=10**6, max_memory_bytes=8 * 1024**3, timeout_seconds=3600)
SAMPLED_RUNS = 40


async def measure_phase(meter: CPUMeter, client: Client, system: System, agents: list[list[Program]]) -> Measured:
    c0 = meter.read()
    m = await system.phase(agents)
    m.cpu = meter.read() - c0
    m.calls = sum(p.calls for a in agents for p in a)
    m.cpu = m.cpu.per(m.calls)
    sampled = [s for s in getattr(m, "sampled", []) if s[1] > 0][:SAMPLED_RUNS]
    if system.bytes_of_run and sampled:
        m.bytes = await measure(client, sampled)
    return m


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=20, help="N: concurrent agents (default 20)")
    ap.add_argument("--runs", type=int, help="executions per agent per phase (default: about 2,000 calls a phase)")
    ap.add_argument("--systems", default="floor,monty,python,tah,pah,ours-agent")
    ap.add_argument("--phases", default="default,cache,evict,long,breaks")
    ap.add_argument("--delay", type=float, default=5.0, help="ms each tool call waits (default 5)")
    ap.add_argument("--cache", type=int, help="workflow cache of the cache phase (default N/4)")
    ap.add_argument("--evict-every", type=int, default=3, help="evict each run after every k calls (default 3)")
    ap.add_argument("--long", type=int, default=1000, help="calls of the long run (default 1,000)")
    ap.add_argument(
        "--long-evict", type=int, default=100, help="the long run again, evicted after every k calls (0: not)"
    )
    ap.add_argument("--heap-mb", default="1,64,256,1024", help="heap sizes the breaks try, MB")
    ap.add_argument("--most-calls", default="5000,20000", help="calls in one execution the breaks try")
    ap.add_argument("--quick", action="store_true", help="N = 8, 3 runs each, a 300-call long run, no breaks")
    ap.add_argument("--setup", action="store_true", help="only make bench/.venv-peers")
    ap.add_argument(
        "--run-timeout", type=float, default=300.0, help="s an execution of a phase may take before it is an error"
    )
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = ap.parse_args()
    peer_systems.RUN_TIMEOUT = args.run_timeout
    if args.setup:
        setup_peer_venv()
        return
    if args.quick:
        args.agents, args.runs, args.long = 8, args.runs or 3, 300
        args.phases = args.phases.replace(",breaks", "")
    n = args.agents
    runs = args.runs or max(2, 2000 // (n * 10))
    cache = args.cache or max(2, n // 4)
    delay = args.delay / 1000
    systems_wanted = args.systems.split(",")
    phases = args.phases.split(",")
    print(f"load average before: {os.getloadavg()}", flush=True)

    env = await start_local_environment()
    client: Client = env.client
    address = client.service_client.config.target_host
    meter = CPUMeter()
    registry = ToolRegistry.from_module("bench.peers.tools")
    ours_shared: dict[str, Any] = {}
    agents_shared: dict[str, Any] = {}
    systems: list[System] = []
    durable: Client | None = None
    for name in systems_wanted:
        if name == "floor":
            systems.append(Floor(client))
        elif name in ("monty", "python"):
            systems.append(Ours(client, registry, name, ours_shared))
        elif name == "tah":
            systems.append(Harness(address))
        elif name in ("pah", "ours-agent"):
            if durable is None:
                from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

                durable = await Client.connect(
                    address,
                    plugins=[PydanticAIPlugin(), CodeModePlugin(tools=registry, store=store_of(client.data_converter))],
                )
            from bench.peers import pai_agent

            if name == "pah" and pai_agent.peer is None:
                print("pah skipped: pip install -e '.[bench]' for pydantic-ai-harness")
                continue
            systems.append(AgentSystem(name, durable, agents_shared))
        else:
            raise SystemExit(f"unknown system {name!r}")

    seeds = iter(range(10**9))
    results: dict[str, list[Measured]] = {}
    longs: list[dict[str, Any]] = []
    breaks: list[dict[str, Any]] = []

    def programs() -> list[list[Program]]:
        return [[program(next(seeds)) for _ in range(runs)] for _ in range(n)]

    configs = {
        "default": Config("default"),
        "cache": Config("cache", max_cached=cache),
        "evict": Config("evict", evict_every=args.evict_every),
    }
    titles = {
        "default": f"N = {n}, default workflow cache",
        "cache": f"N = {n}, workflow cache of {cache} runs",
        "evict": f"N = {n}, each run evicted after every {args.evict_every} calls",
    }
    try:
        for phase in [p for p in phases if p in configs]:
            cfg = configs[phase]
            rows: list[Measured] = []
            for system in systems:
                await system.configure(cfg, delay)
                for s in range(2):  # warm: pools, type checkers, workflow modules
                    await system.one(program(-1 - s).code, 120)
                m = await measure_phase(meter, client, system, programs())
                m.phase = phase
                rows.append(m)
                print(
                    f"{phase} {system.name}: {m.calls} calls in {m.wall:.1f}s = {m.rate:.0f}/s, CPU {m.cpu_ms:.1f} ms/call "
                    f"(worker {m.worker_ms:.1f}, server {m.server_ms:.1f}), p95 {m.pct(0.95):.0f} ms, "
                    f"history {m.history:.0f} B/call, {m.n_errors} errors, {m.counted}/{m.calls} calls ran, "
                    f"{m.evictions} evictions, load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
                for e in m.errors:
                    print(f"   {e}", flush=True)
            results[phase] = rows

        # Our default limits (500 calls, 256 MB, 30 s of compute) are per request: the long run
        # and the breaks ask for more, as a user whose code needs it would.
        ours_shared["limits"] = BIG_LIMITS
        if "long" in phases:
            for cfg in [Config("long")] + (
                [Config("long-evict", evict_every=args.long_evict)] if args.long_evict else []
            ):
                for system in systems:
                    if system.name == "ours-agent":
                        continue
                    await system.configure(cfg, delay)
                    await system.one(program(-1).code, 120)
                    c0 = meter.read()
                    r = await system.one(str(args.long), timeout=1800, timed=True)
                    cpu = (meter.read() - c0).per(args.long)
                    t = r["times"]
                    first = t[100] - t[0] if len(t) > 100 else float("nan")
                    last = t[-1] - t[-101] if len(t) > 100 else float("nan")
                    row = {
                        "config": cfg.name,
                        "system": system.name,
                        "ok": r["ok"],
                        "seconds": r["seconds"],
                        "calls": r["calls"],
                        "first100": first,
                        "last100": last,
                        "cpu_ms": (cpu.worker + cpu.sandbox + cpu.server) * 1000,
                        "output": r["output"][-200:],
                    }
                    longs.append(row)
                    print(
                        f"{cfg.name} {system.name}: {'ok' if r['ok'] else 'FAILED'} {r['seconds']:.1f}s, "
                        f"first 100 {first:.2f}s, last 100 {last:.2f}s, CPU {row['cpu_ms']:.1f} ms/call, "
                        f"{r['calls']} calls ran, load {os.getloadavg()[0]:.1f}"
                        + ("" if r["ok"] else f": {r['output'][-300:]}"),
                        flush=True,
                    )

        if "breaks" in phases:
            breaks = await run_breaks(args, systems, delay, ours_shared, client)
    finally:
        for system in systems:
            await system.close()
        await env.shutdown()

    print(f"\nload average after: {os.getloadavg()}")
    for phase, rows in results.items():
        print_phase_table(titles[phase], rows)
    if longs:
        print_long_table(args.long, longs)
    if breaks:
        print_breaks_table(breaks)
    if args.json:
        write_json(args.json, results, longs, breaks)


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
