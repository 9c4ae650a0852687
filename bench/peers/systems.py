"""The systems the peers benchmark drives, each behind one interface (``configure``, a
``phase`` of agents, ``one`` execution): the floor, ours (Monty, python), our agent and
pydantic-ai-harness's in one pydantic-ai agent worker, and temporal-agent-harness in a
subprocess of its own environment."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import PollerBehaviorSimpleMaximum, Worker

from bench.agent_workload import Program
from bench.floor_workflow import BareAgentWorkflow, BareWorkflow
from bench.peers import floor as floor_acts
from bench.peers import tool_hooks
from bench.peers.programs import long_code
from bench.peers.report import Config, Measured
from bench.peers.stuck_runs import stuck
from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.runtimes.types import ExecutionLimits
from codemode.worker.converter import store_of
from codemode.worker.plugin import CodeModePlugin
from codemode.workflows.models import CodeExecutionRequest

ROOT = Path(__file__).resolve().parents[2]
PEER_VENV = ROOT / "bench" / ".venv-peers"
PEER_REQUIREMENT = "temporal-agent-harness[code-mode]==0.8.0"
#: Seconds one execution of a phase may take before it counts as an error (``--run-timeout``).
RUN_TIMEOUT = 300.0


def setup_peer_venv() -> Path:
    """Make ``bench/.venv-peers`` with temporal-agent-harness 0.8 (pydantic-monty 1.0), once."""
    python = PEER_VENV / "bin" / "python"
    ok = (
        python.exists()
        and subprocess.run(
            [str(python), "-c", "import temporal_agent_harness.harness.code_mode.monty_stepper"],
            capture_output=True,
            check=False,
        ).returncode
        == 0
    )
    if not ok:
        print(f"making {PEER_VENV} ({PEER_REQUIREMENT})", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", PEER_REQUIREMENT], check=True)
    return python


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
