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
import contextlib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from bench.agent_workload import Program, agent_code
from bench.cpu import CPU, CPUMeter
from bench.floor_workflow import BareAgentWorkflow, BareWorkflow
from bench.history_bytes import HistoryBytes, measure
from bench.peers import floor as floor_acts
from bench.peers import tool_hooks
from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.following import query_status, send_decision
from codemode.runtimes.types import ExecutionLimits
from codemode.worker.converter import store_of
from codemode.worker.dev_server import start_local_environment
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import CodeExecutionRequest

PEER_VENV = ROOT / "bench" / ".venv-peers"
BIG_LIMITS = ExecutionLimits(max_tool_calls=10**6, max_memory_bytes=8 * 1024**3, timeout_seconds=3600)
PEER_REQUIREMENT = "temporal-agent-harness[code-mode]==0.8.0"
SAMPLED_RUNS = 40
#: Seconds one execution of a phase may take before it counts as an error (``--run-timeout``).
RUN_TIMEOUT = 300.0


def setup_peer_venv() -> Path:
    """Make ``bench/.venv-peers`` with temporal-agent-harness 0.8 (pydantic-monty 1.0), once."""
    python = PEER_VENV / "bin" / "python"
    ok = (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import temporal_agent_harness.harness.code_mode.monty_stepper"], capture_output=True
        ).returncode
        == 0
    )
    if not ok:
        print(f"making {PEER_VENV} ({PEER_REQUIREMENT})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PEER_REQUIREMENT], check=True)
    return python


# -- what a phase measured --------------------------------------------------------------------


@dataclass
class Measured:
    system: str
    phase: str
    calls: int = 0
    wall: float = float("nan")
    cpu: CPU = field(default_factory=CPU)
    latencies: list[float] = field(default_factory=list)
    bytes: HistoryBytes | None = None
    errors: list[str] = field(default_factory=list)
    n_errors: int = 0
    counted: int = 0  # tool executions counted where the tools ran
    evictions: int = 0
    note: str = ""

    @property
    def rate(self) -> float:
        return self.calls / self.wall if self.wall else float("nan")

    @property
    def cpu_ms(self) -> float:
        return (self.cpu.worker + self.cpu.sandbox + self.cpu.server) * 1000

    @property
    def worker_ms(self) -> float:
        return (self.cpu.worker + self.cpu.sandbox) * 1000

    @property
    def server_ms(self) -> float:
        return self.cpu.server * 1000

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")

    @property
    def history(self) -> float:
        return self.bytes.history if self.bytes is not None else float("nan")


@dataclass
class Config:
    """A worker configuration: its workflow cache (None: the SDK's default, 1,000) and an
    eviction of each run after every ``evict_every`` calls (0: none)."""

    name: str
    max_cached: int | None = None
    evict_every: int = 0


# -- the systems -------------------------------------------------------------------------------


class System:
    name = ""
    #: Whether the workflow holding the calls is the one the phase starts (history bytes).
    bytes_of_run = True

    async def configure(self, cfg: Config, delay: float) -> None:
        raise NotImplementedError

    async def phase(self, agents: list[list[Program]]) -> Measured:
        raise NotImplementedError

    async def one(self, code: str, timeout: float, timed: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    async def close(self) -> None:
        pass


class LocalSystem(System):
    """A system whose workers run in this process: one ``run(program) -> workflow id`` per
    execution, and a worker rebuilt for each configuration."""

    def __init__(self, name: str, shared: dict[str, Any] | None = None) -> None:
        self.name = name
        self.worker: Worker | None = None
        self.task: asyncio.Task[None] | None = None
        #: Systems that share one worker (both runtimes of ours; both agents) share this dict.
        self.shared = shared if shared is not None else {}

    def build(self, cfg: Config) -> Worker:
        raise NotImplementedError

    def client_of(self) -> Client:
        return getattr(self, "client", None) or self.durable  # type: ignore[attr-defined]

    async def run(self, code: str, groups: list[int], wid: str) -> str:
        """Run one program to its end, returning its output (raise on failure)."""
        raise NotImplementedError

    async def configure(self, cfg: Config, delay: float) -> None:
        tool_hooks.delay, tool_hooks.evict_every = delay, cfg.evict_every
        key = (cfg.name, cfg.max_cached, delay)
        if self.shared.get("key") == key:  # a system sharing the worker built it already
            self.worker = self.shared["worker"]
            return
        owner = self.shared.get("owner")
        if owner is not None:
            await owner.close()
        await self.close()
        self.worker = self.build(cfg)
        self.task = asyncio.create_task(self.worker.run())
        self.shared.update(key=key, worker=self.worker, owner=self)
        await asyncio.sleep(0.3)

    def activate(self) -> None:
        tool_hooks.worker = self.worker

    async def close(self) -> None:
        if self.shared.get("owner") is self:
            self.shared.pop("key", None)
            self.shared.pop("owner", None)
            if self.worker is not None:
                with contextlib.suppress(Exception):
                    await self.worker.shutdown()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await self.task  # type: ignore[misc]
        self.worker = None

    async def phase(self, agents: list[list[Program]]) -> Measured:
        self.activate()
        m = Measured(self.name, "")
        ids: list[tuple[str, int]] = []

        async def agent(programs: list[Program]) -> None:
            for p in programs:
                wid = f"{self.name}-{uuid.uuid4().hex[:12]}"
                t0 = time.perf_counter()
                try:
                    await asyncio.wait_for(self.run(p.code, p.groups, wid), RUN_TIMEOUT)
                except TimeoutError:  # a run that stalls (e.g. failing workflow tasks) is counted, not waited for
                    m.n_errors += 1
                    if len(m.errors) < 3:
                        m.errors.append(f"no result after {RUN_TIMEOUT:.0f} s{await stuck(self.client_of(), wid)}")
                    continue
                except Exception as err:  # noqa: BLE001 - counted and shown
                    m.n_errors += 1
                    if len(m.errors) < 3:
                        m.errors.append(f"{type(err).__name__}: {str(err)[:300]}")
                    continue
                m.latencies.append(time.perf_counter() - t0)
                ids.append((wid, p.calls))

        tool_hooks.reset()
        t0 = time.perf_counter()
        await asyncio.gather(*(agent(a) for a in agents))
        m.wall = time.perf_counter() - t0
        m.counted = sum(tool_hooks.calls.values())
        m.evictions = tool_hooks.evictions
        m.sampled = ids  # type: ignore[attr-defined]
        return m

    async def one(self, code: str, timeout: float, timed: bool = False) -> dict[str, Any]:
        self.activate()
        tool_hooks.reset()
        wid = f"{self.name}-{uuid.uuid4().hex[:12]}"
        if timed:
            tool_hooks.timed.add(wid)
        t0 = time.perf_counter()
        try:
            out = await asyncio.wait_for(self.run(code, [], wid), timeout)
            ok, what = True, str(out)
        except TimeoutError:
            ok, what = False, f"no result after {timeout:.0f} s{await stuck(self.client_of(), wid)}"
        except Exception as err:  # noqa: BLE001
            ok, what = False, f"{type(err).__name__}: {err}"
        return {
            "ok": ok,
            "output": what[-600:],
            "seconds": time.perf_counter() - t0,
            "id": wid,
            "calls": sum(tool_hooks.calls.values()),
            "times": tool_hooks.times.get(wid, []),
        }


async def stuck(client: Client, wid: str) -> str:
    """Why a run gave no result in time (its last failed workflow task), after terminating it
    so it costs the next tests nothing."""
    handle = client.get_workflow_handle(wid)
    why = ""
    with contextlib.suppress(Exception):
        async for event in handle.fetch_history_events():
            if event.HasField("workflow_task_failed_event_attributes"):
                why = event.workflow_task_failed_event_attributes.failure.message
            elif event.HasField("workflow_task_timed_out_event_attributes"):
                why = "a workflow task timed out"
    with contextlib.suppress(Exception):
        await handle.terminate("the benchmark gave up on it")
    return f" (terminated; last workflow task failure: {why[:300]})" if why else " (terminated)"


class Floor(LocalSystem):
    def __init__(self, client: Client) -> None:
        super().__init__("floor")
        self.client = client
        self.tq = f"peers-floor-{uuid.uuid4().hex[:6]}"

    def build(self, cfg: Config) -> Worker:
        kw: dict[str, Any] = {} if cfg.max_cached is None else {"max_cached_workflows": cfg.max_cached}
        return Worker(
            self.client,
            task_queue=self.tq,
            workflows=[BareAgentWorkflow, BareWorkflow],
            activities=[floor_acts.noop],
            max_concurrent_activities=200,
            activity_task_poller_behavior=PollerBehaviorSimpleMaximum(16),
            max_eager_activity_reservations_per_workflow_task=16,
            **kw,
        )

    async def run(self, code: str, groups: list[int], wid: str) -> str:
        if groups:
            return str(
                await self.client.execute_workflow(BareAgentWorkflow.run, args=[groups, -1], id=wid, task_queue=self.tq)
            )
        calls = int(code)  # the long run: ``code`` is the number of sequential calls
        return str(await self.client.execute_workflow(BareWorkflow.run, calls, id=wid, task_queue=self.tq))


class Ours(LocalSystem):
    """Our engine, one worker for both runtimes (a plain ``Worker`` with ``CodeModePlugin``)."""

    def __init__(self, client: Client, registry: ToolRegistry, runtime: str, shared: dict[str, Any]) -> None:
        super().__init__(runtime, shared)
        self.client, self.registry, self.runtime = client, registry, runtime
        self.tq = shared.setdefault("tq", f"peers-ours-{uuid.uuid4().hex[:6]}")

    def build(self, cfg: Config) -> Worker:
        kw: dict[str, Any] = {} if cfg.max_cached is None else {"max_cached_workflows": cfg.max_cached}
        plugin = CodeModePlugin(
            self.registry,
            store=store_of(self.client.data_converter),
            notify=None,
            approvers=None,
            runtimes=self.shared.get("runtimes"),
        )
        return Worker(
            self.client,
            task_queue=self.tq,
            plugins=[plugin],
            max_concurrent_activities=200,
            max_concurrent_local_activities=200,
            **kw,
        )

    async def run(self, code: str, groups: list[int], wid: str) -> str:
        if code.isdigit():
            code = long_code(int(code))
        request = CodeExecutionRequest(
            code=code, runtime=self.runtime, limits=self.shared.get("limits") or ExecutionLimits()
        )
        handle = await start_execution(self.client, request, task_queue=self.tq, execution_id=wid)
        out = await handle.result()
        if not out.success:
            raise RuntimeError(f"{out.error}")
        return json.dumps(out.output, default=str)[-500:]


class AgentSystem(LocalSystem):
    """An agent workflow under pydantic-ai's Temporal durability: ``pah`` (pydantic-ai-harness's
    CodeMode) or ``ours-agent`` (DurableCodeMode); one worker runs both."""

    def __init__(self, name: str, durable: Client, shared: dict[str, Any]) -> None:
        super().__init__(name, shared)
        self.durable = durable
        self.tq = shared.setdefault("tq", f"peers-agents-{uuid.uuid4().hex[:6]}")
        self.bytes_of_run = name == "pah"

    def build(self, cfg: Config) -> Worker:
        from bench.peers import pai_agent

        kw: dict[str, Any] = {} if cfg.max_cached is None else {"max_cached_workflows": cfg.max_cached}
        workflows = [pai_agent.OursAgentWorkflow] + ([pai_agent.PeerAgentWorkflow] if pai_agent.peer else [])
        return Worker(self.durable, task_queue=self.tq, workflows=workflows, max_concurrent_activities=200, **kw)

    async def run(self, code: str, groups: list[int], wid: str) -> str:
        from bench.peers import pai_agent

        if code.isdigit():
            code = long_code(int(code))
        wf = pai_agent.PeerAgentWorkflow.run if self.name == "pah" else pai_agent.OursAgentWorkflow.run
        out = await self.durable.execute_workflow(wf, code, id=wid, task_queue=self.tq)
        # CodeMode hands code errors back as the tool's result, in words (also its own failure to
        # run the code: no `monty` binary); ours as an outcome
        if (
            out.startswith(("ERROR:", "Runtime error", "Type error", "Syntax error", "Code execution failed"))
            or '"success":false' in out.replace(" ", "")[:300]
        ):
            raise RuntimeError(out[-400:])
        return out


class Harness(System):
    """temporal-agent-harness, in its own environment: a subprocess (``tah_worker.py``) that
    runs its worker and its agents and answers the benchmark's commands."""

    name = "tah"

    def __init__(self, address: str) -> None:
        python = setup_peer_venv()
        self.proc = subprocess.Popen(
            [str(python), "-m", "bench.peers.tah_worker", address],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lock = asyncio.Lock()
        ready = json.loads(self.proc.stdout.readline())  # type: ignore[union-attr]
        assert ready.get("ready"), ready

    async def ask(self, cmd: dict[str, Any]) -> dict[str, Any]:
        async with self.lock:

            def talk() -> dict[str, Any]:
                assert self.proc.stdin is not None and self.proc.stdout is not None
                self.proc.stdin.write(json.dumps(cmd) + "\n")
                self.proc.stdin.flush()
                line = self.proc.stdout.readline()
                if not line:
                    raise RuntimeError("the peer's worker process ended")
                return json.loads(line)

            answer = await asyncio.to_thread(talk)
        if "error" in answer and len(answer) == 1:
            raise RuntimeError(answer["error"])
        return answer

    async def configure(self, cfg: Config, delay: float) -> None:
        await self.ask({"cmd": "worker", "max_cached": cfg.max_cached, "evict_every": cfg.evict_every, "delay": delay})

    async def phase(self, agents: list[list[Program]]) -> Measured:
        expected = {p.code: p.calls for a in agents for p in a}
        a = await self.ask({"cmd": "phase", "agents": [[p.code for p in ps] for ps in agents]})
        m = Measured(
            self.name, "", wall=a["wall"], latencies=a["latencies"], errors=a["errors"], n_errors=a["n_errors"]
        )
        m.counted = sum(a["calls"].values())
        m.evictions = a["evictions"]
        calls = list(expected.values())
        m.sampled = [(wid, c) for wid, c in zip(a["ids"], calls)]  # type: ignore[attr-defined]
        # ids come back in completion order: take each run's calls as counted where it ran
        m.sampled = [(wid, a["calls"].get(wid, 0)) for wid in a["ids"]]  # type: ignore[attr-defined]
        return m

    async def one(self, code: str, timeout: float, timed: bool = False) -> dict[str, Any]:
        if code.isdigit():
            code = long_code(int(code))
        return await self.ask({"cmd": "one", "script": code, "timeout": timeout, "timed": timed})

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"cmd": "quit"}) + "\n")
            self.proc.stdin.flush()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


# -- programs ----------------------------------------------------------------------------------


def keyword_calls(code: str) -> str:
    """Every tool call with keyword arguments: pydantic-ai-harness's stubs make the tools'
    parameters keyword-only, so all systems get the same code written that way."""
    return re.sub(r"\bnoop\(", "noop(i=", re.sub(r"\becho\(", "echo(text=", code))


def program(seed: int) -> Program:
    p = agent_code(seed, approval=False)
    return Program(keyword_calls(p.code), p.groups)


def long_code(calls: int) -> str:
    return f"t = 0\nfor i in range({calls}):\n    t += await noop(i=i)\nt"


def gathered_code(calls: int, width: int = 100) -> str:
    return (
        f"import asyncio\nt = 0\nfor b in range({calls // width}):\n"
        f"    xs = await asyncio.gather(*[noop(i=b * {width} + i) for i in range({width})])\n    t += sum(xs)\nt"
    )


def heap_code(megabytes: int) -> str:
    return f'blob = "x" * {megabytes * 1024 * 1024}\nn = await noop(i=1)\nm = await noop(i=2)\nlen(blob) + n + m'


PANDAS_CODE = "import pandas as pd\nn = await noop(i=1)\nint(pd.DataFrame({'a': [n, 2]}).a.sum())"


# -- running the phases ------------------------------------------------------------------------


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


def gist(output: str) -> str:
    """One line of what a break test printed: its error line when it has one."""
    lines = [ln.strip() for ln in output.replace("\\n", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"(Error|error|limit|terminated|refused|changed|stayed)", ln)]
    text = errors[-1] if errors else (lines[-1] if lines else "")
    return text.replace("|", "/")[:240]


def percent(x: float) -> str:
    return f"{x:.2f}x"


def print_phase_table(title: str, rows: list[Measured]) -> None:
    floor = next((r for r in rows if r.system == "floor"), None)
    print(f"\n### {title}\n")
    print(
        "| system | calls/s | vs floor | CPU/call ms worker+server | vs floor | p95 ms | vs floor | history B/call | vs floor | checks |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = floor or r
        check = (
            "ok"
            if r.n_errors == 0 and r.counted == r.calls
            else f"{r.n_errors} errors, {r.counted}/{r.calls} calls ran"
        )
        if r.evictions:
            check += f", {r.evictions} evictions"
        print(
            f"| {r.system} | {r.rate:.0f} | {percent(r.rate / f.rate)} | {r.cpu_ms:.1f} = {r.worker_ms:.1f}+{r.server_ms:.1f} "
            f"| {percent(r.cpu_ms / f.cpu_ms)} | {r.pct(0.95):.0f} | {percent(r.pct(0.95) / f.pct(0.95))} "
            f"| {r.history:.0f} | {percent(r.history / f.history)} | {check} |"
        )
    for r in rows:
        for e in r.errors:
            print(f"  {r.system}: {e}")
    by = {r.system: r for r in rows}
    for ours in ("monty", "python"):
        for peer in ("tah", "pah"):
            if ours in by and peer in by:
                o, p = by[ours], by[peer]
                print(f"  {ours} vs {peer}: calls/s {o.rate / p.rate:.2f}x, CPU per call {o.cpu_ms / p.cpu_ms:.2f}x "
                      f"({o.cpu_ms:.1f} vs {p.cpu_ms:.1f} ms), p95 {o.pct(0.95) / p.pct(0.95):.2f}x, "
                      f"history per call {o.history / p.history:.2f}x")
    if "ours-agent" in by and "pah" in by:
        o, p = by["ours-agent"], by["pah"]
        print(f"  ours-agent vs pah (the same agent): calls/s {o.rate / p.rate:.2f}x, CPU per call {o.cpu_ms / p.cpu_ms:.2f}x")
    for r in rows:
        if r.bytes is not None:
            print(f"  {r.system} history per call by event type (payload bytes): {r.bytes.top()}")


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
    global RUN_TIMEOUT
    RUN_TIMEOUT = args.run_timeout
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
        print(f"\n### One execution of {args.long} sequential calls\n")
        print(
            "| run | system | total s | first 100 calls s | last 100 calls s | last/first | CPU/call ms | calls ran |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in longs:
            print(
                f"| {r['config']} | {r['system']} | {r['seconds']:.1f}{'' if r['ok'] else ' (failed)'} | {r['first100']:.2f} "
                f"| {r['last100']:.2f} | {r['last100'] / r['first100']:.2f}x | {r['cpu_ms']:.1f} | {r['calls']} |"
            )
    if breaks:
        print("\n### Where each breaks\n")
        print("| test | system | ok | seconds | calls ran | what happened |")
        print("|---|---|---|---|---|---|")
        for b in breaks:
            what = gist(b["output"])
            print(
                f"| {b['test']} | {b['system']} | {'yes' if b['ok'] else 'no'} | {b['seconds']:.1f} | {b['calls']} | {what} |"
            )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "load": os.getloadavg(),
                    "phases": {
                        k: [
                            {
                                **{
                                    f: getattr(r, f)
                                    for f in ("system", "phase", "calls", "wall", "n_errors", "counted", "evictions")
                                },
                                "rate": r.rate,
                                "cpu_ms": r.cpu_ms,
                                "worker_ms": r.worker_ms,
                                "server_ms": r.server_ms,
                                "p95_ms": r.pct(0.95),
                                "history": r.history,
                            }
                            for r in rows
                        ]
                        for k, rows in results.items()
                    },
                    "long": longs,
                    "breaks": breaks,
                },
                indent=1,
                default=str,
            )
        )


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


APPROVAL_CODE = 'r = await send_report(to="ops@example.com", body="monday")\nr'


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


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
