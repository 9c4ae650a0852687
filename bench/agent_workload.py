"""An agent's real workload on a real Temporal dev server: N agents at once, each sending a
stream of code it just wrote, as ratios against a floor measured in the same run (the
machine is noisy: only ratios mean something). Prints numbers, asserts nothing.

Every execution is new code with its own structure (``agent_code``: sequential calls,
loops, branches, helper functions, gathered batches, text work), about 10 tool calls, and one
in ten parks on a call that needs approval, which a scripted person decides within a second
of seeing it (polling the status, as ``codemode status`` would). Per (runtime, N), three
phases, each N agents running ``--runs`` executions back to back:

* floor: a bare workflow making the same calls as no-op activities, in the same groups
  (gathered where the code gathers), parked on a signal where the code waits for approval;
* one code: the durable path, every agent sending the same program (type-checked once);
* new code: the durable path, every execution a program no one ran before.

It prints calls/s (all calls of the phase over its wall time) against the floor, CPU per call
of the worker process (this process: the workers, the client and the person, the same on both
sides), its sandbox subprocesses and the dev server (``bench/cpu.py``), and the p50/p95 latency
from the start of an execution to its outcome (of the executions no person held up).

With ``--front N`` it also runs N agents through each door an agent comes by, against the
direct path (``start_execution``) with the same kind of programs and no approvals: a
pydantic-ai ``Agent`` with ``DurableCodeMode`` (``run_code``, a session cell per call) and
MCP clients calling the MCP front's ``execute`` (the official SDK's client, in memory).

    python bench/agent_workload.py [--agents 20,100,200] [--runtimes monty,python] [--runs R] [--profile new]
    python bench/agent_workload.py --quick          # agents 10,40, runs 3
    python bench/agent_workload.py --agents 20 --phases floor --front 20   # the doors at N=20
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import random
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client  # noqa: E402
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker  # noqa: E402

from bench.cpu import CPU, CPUMeter  # noqa: E402
from bench.floor_workflow import BareAgentWorkflow, noop  # noqa: E402
from bench.history_bytes import HistoryBytes, first_call_ms, measure  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.client.following import query_status, send_decision  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402

#: One execution in this many parks on a call a person approves.
APPROVAL_EVERY = 10
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


@dataclass
class Program:
    """A program an agent wrote: its code, its calls in groups (1: sequential, more:
    gathered) and the index of the call that needs approval (-1: none)."""

    code: str
    groups: list[int]
    park_at: int = -1

    @property
    def calls(self) -> int:
        return sum(self.groups)


def agent_code(seed: int, *, approval: bool) -> Program:
    """A program of about 10 tool calls whose structure follows from ``seed``."""
    rng = random.Random(seed)
    target = rng.choice([9, 10, 10, 11])
    head: list[str] = ["import asyncio", "", f"acc = {rng.randint(0, 99)}", "words = []"]
    body: list[str] = []
    groups: list[int] = []
    park_at = -1
    park_after = rng.randint(1, target - 2) if approval else -1
    n = 0
    while sum(groups) < target:
        left = target - sum(groups)
        if approval and park_at < 0 and sum(groups) >= park_after:
            park_at = sum(groups)
            body += [f'r{n} = await send_report("ops@example.com", f"step {n}: {{acc}}")', f"words.append(r{n})"]
            groups.append(1)
            n += 1
            continue
        kind = rng.choice(["assign", "loop", "branch", "helper", "gather", "pair", "text", "pure"])
        k = rng.randint(1, 50)
        if kind == "assign":
            body += [f"v{n} = await noop({k})", f"acc += v{n}"]
            groups.append(1)
        elif kind == "loop" and left >= 2:
            m = rng.randint(2, min(3, left))
            body += [f"for j{n} in range({m}):", f"    acc += await noop(j{n} * {k})"]
            groups += [1] * m
        elif kind == "branch":
            body += [
                f"if acc % {rng.randint(2, 5)} == 0:",
                f"    acc += await noop({k})",
                "else:",
                f"    acc -= await noop({k + 1})",
            ]
            groups.append(1)
        elif kind == "helper":
            head += ["", f"async def step{n}(x: int) -> int:", f"    y = await noop(x + {k})", f"    return y * {rng.randint(2, 9)}"]
            body.append(f"acc += await step{n}(acc % {rng.randint(7, 97)})")
            groups.append(1)
        elif kind == "gather" and left >= 2:
            w = rng.randint(2, min(4, left))
            body += [f"xs{n} = await asyncio.gather(*[noop(i + {k}) for i in range({w})])", f"acc += sum(xs{n})"]
            groups.append(w)
        elif kind == "pair" and left >= 2:
            word = rng.choice(WORDS)
            body += [f'a{n}, b{n} = await asyncio.gather(noop({k}), echo("{word}"))', f"acc += a{n} + len(b{n})"]
            groups.append(2)
        elif kind == "text":
            word = rng.choice(WORDS)
            body += [f'w{n} = await echo("{word}-{k}")', f"words.append(w{n}.upper())"]
            groups.append(1)
        else:  # no call: some work on what came back
            body.append(
                rng.choice(
                    [
                        f"acc = acc * {rng.randint(2, 5)} % {rng.randint(1000, 9999)}",
                        f"lengths{n} = {{w: len(w) for w in words}}",
                        f"words = sorted(words, reverse={rng.choice(['True', 'False'])})",
                        f"acc += sum(i * i for i in range({rng.randint(3, 40)}))",
                    ]
                )
            )
        n += 1
    tail = rng.choice(["acc", '{"acc": acc, "words": words}', "[acc, len(words)]"])
    return Program("\n".join([*head, "", *body, tail]), groups, park_at)


@dataclass
class Phase:
    """What one phase measured."""

    wall: float
    calls: int
    cpu: CPU
    latencies: list[float] = field(default_factory=list)  # of the executions no person held up
    parked_latencies: list[float] = field(default_factory=list)
    #: (workflow id, calls) of the runs whose histories the bytes are read from.
    sampled: list[tuple[str, int]] = field(default_factory=list)
    bytes: HistoryBytes | None = None
    #: p50 from an execution's start to its first tool call's scheduling, in ms (history times).
    first_call: float = float("nan")

    @property
    def rate(self) -> float:
        return self.calls / self.wall

    @property
    def cpu_ms(self) -> float:
        """CPU per call of the worker, its sandboxes and the server together, in ms."""
        return (self.cpu.worker + self.cpu.sandbox + self.cpu.server) * 1000

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


async def poll_until(check: Callable[[], Awaitable[bool]], every: float = 0.1) -> None:
    while not await check():
        await asyncio.sleep(every)


class Person:
    """Looks at what waits (status) every 0.1 s and decides each within a second of seeing it."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = random.Random(seed)

    async def approve_ours(self, handle) -> None:  # type: ignore[no-untyped-def]
        seen: list[str] = []

        async def waiting() -> bool:
            status = await query_status(handle)
            seen[:] = [p.call_id for p in status.pending_approvals] if status else []
            return bool(seen)

        await poll_until(waiting)
        await asyncio.sleep(self.rng.uniform(0.1, 0.9))
        await send_decision(handle, seen[0], approve=True, by="bench person")

    async def approve_floor(self, handle) -> None:  # type: ignore[no-untyped-def]
        await poll_until(lambda: handle.query(BareAgentWorkflow.parked))
        await asyncio.sleep(self.rng.uniform(0.1, 0.9))
        await handle.signal(BareAgentWorkflow.approve)


#: Runs per phase whose histories are read (after the phase, outside its CPU and wall time).
SAMPLED_RUNS = 40


async def run_phase(
    meter: CPUMeter, agents: int, runs: int, programs: Callable[[int, int], Program],
    one: Callable[[Program], Awaitable[str | None]], client: Client | None = None,
) -> Phase:
    """``agents`` agents at once, each running ``runs`` programs back to back; with ``client``,
    the bytes per call of up to ``SAMPLED_RUNS`` of their histories (``one`` returns the id)."""
    latencies: list[float] = []
    parked: list[float] = []
    sampled: list[tuple[str, int]] = []
    calls = 0

    async def agent(a: int) -> None:
        nonlocal calls
        for r in range(runs):
            program = programs(a, r)
            t0 = time.perf_counter()
            wid = await one(program)
            (parked if program.park_at >= 0 else latencies).append(time.perf_counter() - t0)
            calls += program.calls
            if wid is not None and len(sampled) < SAMPLED_RUNS:
                sampled.append((wid, program.calls))

    c0, t0 = meter.read(), time.perf_counter()
    await asyncio.gather(*(agent(a) for a in range(agents)))
    wall, cpu = time.perf_counter() - t0, meter.read() - c0
    phase = Phase(wall, calls, cpu.per(calls), latencies, parked, sampled)
    if client is not None and sampled:
        phase.bytes = await measure(client, sampled)
    return phase


async def run_agents(
    meter: CPUMeter, client: Client, registry: ToolRegistry, tq: str, runtime: str, agents: int, runs: int,
    seeds: Iterator[int],
) -> Phase:
    """``agents`` pydantic-ai agents at once (a ``FunctionModel`` plays the model), each a
    conversation that calls ``run_code`` ``runs`` times with a new program: the latency is from
    the model's call to the answer it gets back."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from codemode.integrations.pydantic_ai import DurableCodeMode

    code_mode = DurableCodeMode(registry, client=client, task_queue=tq, runtime=runtime)
    latencies: list[float] = []
    calls = 0

    async def agent(_: int) -> None:
        nonlocal calls
        programs = [agent_code(next(seeds), approval=False) for _ in range(runs)]
        asked: list[float] = []

        def model(messages, info):  # type: ignore[no-untyped-def]
            now = time.perf_counter()
            if asked:
                latencies.append(now - asked[-1])
            if len(asked) == len(programs):
                return ModelResponse(parts=[TextPart("done")])
            asked.append(now)
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": programs[len(asked) - 1].code})])

        await Agent(FunctionModel(model), capabilities=[code_mode]).run("go")
        calls += sum(p.calls for p in programs)

    c0, t0 = meter.read(), time.perf_counter()
    await asyncio.gather(*(agent(a) for a in range(agents)))
    wall, cpu = time.perf_counter() - t0, meter.read() - c0
    return Phase(wall, calls, cpu.per(calls), latencies)


async def run_mcp_clients(
    meter: CPUMeter, client: Client, registry: ToolRegistry, tq: str, runtime: str, agents: int, runs: int,
    seeds: Iterator[int],
) -> Phase:
    """``agents`` MCP clients at once (the official SDK's, in memory, with a progress token, as
    an agent's client calls), each calling ``execute`` ``runs`` times with a new program on
    our MCP server front, served from this process on the same worker and task queue."""
    from mcp import Client as MCPClient

    from codemode.apps.mcp.backend import Backend, BackendSlot
    from codemode.apps.mcp.catalog import ToolCatalog
    from codemode.apps.mcp.execute import Executions
    from codemode.apps.mcp.server import build_server

    backend = Backend(client=client, address=client.service_client.config.target_host, task_queue=tq)
    server = build_server(ToolCatalog.of(registry, runtime=runtime), Executions(BackendSlot(backend), runtime=runtime))
    latencies: list[float] = []
    calls = 0

    async def progress(value: float, total: float | None, message: str | None) -> None:
        pass

    async def agent(_: int) -> None:
        nonlocal calls
        async with MCPClient(server) as mcp:
            for _ in range(runs):
                program = agent_code(next(seeds), approval=False)
                t0 = time.perf_counter()
                res = await mcp.call_tool("execute", {"code": program.code}, progress_callback=progress)
                assert res.structured_content["status"] == "completed", res
                latencies.append(time.perf_counter() - t0)
                calls += program.calls

    c0, t0 = meter.read(), time.perf_counter()
    await asyncio.gather(*(agent(a) for a in range(agents)))
    wall, cpu = time.perf_counter() - t0, meter.read() - c0
    return Phase(wall, calls, cpu.per(calls), latencies)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", default="20,100,200", help="comma-separated N")
    ap.add_argument("--runtimes", default="monty,python")
    ap.add_argument("--runs", type=int, help="executions per agent per phase (default: about 2,000 calls a phase, 2 at least)")
    ap.add_argument("--quick", action="store_true", help="agents 10,40")
    ap.add_argument("--phases", default="floor,one,new")
    ap.add_argument("--front", type=int, metavar="N", default=0,
                    help="also run N agents through DurableCodeMode's run_code (a session cell each, no approvals) "
                    "and N MCP clients through the MCP front's execute, against the direct path")
    ap.add_argument("--profile", metavar="PHASE", help="cProfile this process during PHASE (one, new); top 30 printed")
    args = ap.parse_args()
    sizes = [10, 40] if args.quick else [int(x) for x in args.agents.split(",")]
    runtimes = args.runtimes.split(",")
    phases = args.phases.split(",")

    env = await start_local_environment()
    client: Client = env.client
    meter = CPUMeter()
    if not meter.server_found:
        print("(dev server process not found: its CPU reads as 0)")
    tq = f"bench-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry.from_module("bench.agent_tools")
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareAgentWorkflow], activities=[noop],
                  max_concurrent_activities=200, activity_task_poller_behavior=PollerBehaviorSimpleMaximum(16),
                  max_eager_activity_reservations_per_workflow_task=16)
    person = Person()
    seeds = iter(range(10**9))

    async def floor(p: Program) -> str:
        h = await client.start_workflow(BareAgentWorkflow.run, args=[p.groups, p.park_at], id=uuid.uuid4().hex,
                                        task_queue=tq + "-bare")
        decider = asyncio.create_task(person.approve_floor(h)) if p.park_at >= 0 else None
        await h.result()
        if decider is not None:
            await decider
        return h.id

    def ours(runtime: str) -> Callable[[Program], Awaitable[str]]:
        async def one(p: Program) -> str:
            h = await start_execution(client, CodeExecutionRequest(code=p.code, runtime=runtime), task_queue=tq)
            decider = asyncio.create_task(person.approve_ours(h)) if p.park_at >= 0 else None
            out = await h.result()
            if decider is not None:
                await decider
            assert out.success, (out.error, p.code)
            return h.id

        return one

    def parks(a: int, r: int) -> bool:
        return (a * 7 + r * 3) % APPROVAL_EVERY == 0

    rows: list[tuple[str, int, str, Phase, Phase]] = []
    fronts: list[tuple[str, int, Phase, Phase, str]] = []
    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            for runtime in runtimes:  # warm: pools, the type checker, the workflow module
                for s in range(3):
                    await ours(runtime)(agent_code(-1 - s, approval=False))
            await floor(agent_code(-1, approval=False))
            for n in sizes:
                for runtime in runtimes:
                    same = {True: agent_code(-100, approval=True), False: agent_code(-101, approval=False)}
                    kinds: dict[str, Callable[[int, int], Program]] = {
                        "floor": lambda a, r: agent_code(next(seeds), approval=parks(a, r)),
                        "one": lambda a, r, same=same: same[parks(a, r)],
                        "new": lambda a, r: agent_code(next(seeds), approval=parks(a, r)),
                    }
                    measured: dict[str, Phase] = {}
                    runs = args.runs or (3 if args.quick else max(2, 2000 // (n * 10)))
                    for kind in phases:
                        run = floor if kind == "floor" else ours(runtime)
                        profiler = cProfile.Profile() if kind == args.profile else None
                        if profiler is not None:
                            profiler.enable()
                        pool = getattr(cm.sandbox.runtime(runtime), "warm_pool", None) if kind != "floor" else None
                        before = (pool.hits, pool.misses) if pool is not None else (0, 0)
                        measured[kind] = await run_phase(meter, n, runs, kinds[kind], run, client)
                        if pool is not None:
                            print(f"  warm python interpreters: {pool.hits - before[0]} starts took one, "
                                  f"{pool.misses - before[1]} found none (pool of {pool.size})", flush=True)
                        if profiler is not None:
                            profiler.disable()
                            path = f"agent_workload-{runtime}-{n}-{kind}.prof"
                            profiler.dump_stats(path)
                            print(f"profile of N={n} {runtime} {kind} in {path}; by own time:")
                            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
                        p = measured[kind]
                        print(f"N={n} {runtime} {kind}: {p.calls} calls in {p.wall:.1f}s = {p.rate:.0f} calls/s, "
                              f"p50 {p.pct(0.5):.0f} ms p95 {p.pct(0.95):.0f} ms ({len(p.latencies)} unparked, "
                              f"{len(p.parked_latencies)} parked), CPU/call {p.cpu.ms()}", flush=True)
                        if p.bytes is not None:
                            firsts = await first_call_ms(client, p.sampled)
                            first = sorted(firsts)[len(firsts) // 2] if firsts else float("nan")
                            print(f"  bytes/call: history {p.bytes.history:.0f}, payloads {p.bytes.payloads:.0f} "
                                  f"({p.bytes.events / p.bytes.calls:.1f} events/call; {p.bytes.top()}); "
                                  f"first call p50 {first:.0f} ms", flush=True)
                            p.first_call = first
                    f = measured.get("floor")
                    for kind in ("one", "new"):
                        if f is not None and kind in measured:
                            rows.append((runtime, n, kind, f, measured[kind]))
            for runtime in runtimes if args.front else []:
                n, runs = args.front, max(2, 1000 // (args.front * 10))
                direct = await run_phase(meter, n, runs, lambda a, r: agent_code(next(seeds), approval=False),
                                         ours(runtime))
                agent = await run_agents(meter, client, registry, tq, runtime, n, runs, seeds)
                over_mcp = await run_mcp_clients(meter, client, registry, tq, runtime, n, runs, seeds)
                for name, p in (("direct", direct), ("run_code", agent), ("execute", over_mcp)):
                    print(f"front N={n} {runtime} {name}: {p.calls} calls in {p.wall:.1f}s = {p.rate:.0f} calls/s, "
                          f"p50 {p.pct(0.5):.0f} ms p95 {p.pct(0.95):.0f} ms, CPU/call {p.cpu.ms()}", flush=True)
                fronts.append((runtime, n, direct, agent, "run_code (DurableCodeMode, a session cell per call)"))
                fronts.append((runtime, n, direct, over_mcp, "execute (the MCP front, a new execution per call)"))
        finally:
            await bare.shutdown()
            await bare_task
    await env.shutdown()

    print()
    print("| runtime | N | code | calls/s (floor) | vs floor | CPU/call ms w+s+srv (floor) | CPU floor/ours "
          "| p50 ms (floor) | p95 ms (floor) | p95 ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for runtime, n, kind, f, o in rows:
        cpu_o, cpu_f = o.cpu_ms, f.cpu_ms
        print(f"| {runtime} | {n} | {kind} | {o.rate:.0f} ({f.rate:.0f}) | {o.rate / f.rate:.2f}x "
              f"| {cpu_o:.1f} = {o.cpu.worker*1000:.1f}+{o.cpu.sandbox*1000:.1f}+{o.cpu.server*1000:.1f} "
              f"({cpu_f:.1f}) | {cpu_f / cpu_o:.2f}x | {o.pct(0.5):.0f} ({f.pct(0.5):.0f}) "
              f"| {o.pct(0.95):.0f} ({f.pct(0.95):.0f}) | {o.pct(0.95) / f.pct(0.95):.2f}x |")
    print("Goals (issue 28): new-code calls/s >= 0.85x the floor, CPU floor/ours >= 0.85x, p95 ratio <= 1.3x.")
    print()
    print("| runtime | N | code | history B/call (floor) | vs floor | payload B/call (floor) | vs floor "
          "| events/call (floor) | first call p50 ms (floor) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for runtime, n, kind, f, o in rows:
        if o.bytes is None or f.bytes is None:
            continue
        print(f"| {runtime} | {n} | {kind} | {o.bytes.history:.0f} ({f.bytes.history:.0f}) "
              f"| {o.bytes.history / f.bytes.history:.2f}x | {o.bytes.payloads:.0f} ({f.bytes.payloads:.0f}) "
              f"| {o.bytes.payloads / f.bytes.payloads:.2f}x | {o.bytes.events / o.bytes.calls:.1f} "
              f"({f.bytes.events / f.bytes.calls:.1f}) | {o.first_call:.0f} ({f.first_call:.0f}) |")
    print("Goal (issue 40): bytes per call within 1.3x of the floor's; a fresh python execution's first call "
          "within 1.5x of monty's (p50).")
    for runtime, n, d, a, what in fronts:
        cpu_d, cpu_a = d.cpu_ms, a.cpu_ms
        print(f"{what} vs start_execution, {runtime}, N={n}: calls/s "
              f"{a.rate / d.rate:.2f}x, CPU per call {cpu_a / cpu_d:.2f}x ({cpu_a:.1f} vs {cpu_d:.1f} ms), "
              f"p50 {a.pct(0.5) / d.pct(0.5):.2f}x, p95 {a.pct(0.95) / d.pct(0.95):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
