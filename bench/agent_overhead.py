"""What reaching code mode from a pydantic-ai agent costs, as ratios measured in one run.

1. ``run_code`` vs ``start_execution``: the same code (``--calls`` sequential tool calls)
   through an ``Agent`` with ``DurableCodeMode`` (a ``FunctionModel`` plays the model: one
   ``run_code`` call, then an answer) and through ``start_execution`` directly; paired runs in
   one process, alternating order, median ratio. Goal <= 1.05x.
2. The peer, side by side: the same scripted agent and the same tool under pydantic-ai's
   Temporal durability, with our ``DurableCodeMode`` (each ``run_code`` a child execution,
   each tool call its activity) and with pydantic-ai-harness's ``CodeMode`` (Monty in the
   agent's workflow code, each nested tool call an activity), time per tool call for a run of
   ``--peer-calls`` (50) sequential calls; the floor beside both is a bare workflow running
   the same number of no-op activities.

    python bench/agent_overhead.py [--calls 10] [--repeat 7]

Needs the bench extra for the peer: pip install -e '.[dev,bench]'.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.durable_exec.temporal import PydanticAIPlugin  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import FunctionModel  # noqa: E402
from temporalio.client import Client  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench import agent_workflows  # noqa: E402
from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.integrations.pydantic_ai import DurableCodeMode  # noqa: E402
from codemode.worker.converter import store_of  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.plugin import CodeModePlugin  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def code_of(n: int, tag: int) -> str:
    # A new comment per run: every execution pays the same type check, on both sides.
    return f"# run {tag}\nt = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


async def paired(
    a: Callable[[int], Awaitable[None]], b: Callable[[int], Awaitable[None]], repeat: int
) -> tuple[list[float], list[float]]:
    """``repeat`` timings of each, back to back in alternating order."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(repeat):
        order = [(a, ta), (b, tb)] if i % 2 == 0 else [(b, tb), (a, ta)]
        for fn, out in order:
            start = time.perf_counter()
            await fn(i)
            out.append(time.perf_counter() - start)
    return ta, tb


def ratio(ours: list[float], floor: list[float]) -> float:
    return statistics.median(o / f for o, f in zip(ours, floor))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--peer-calls", type=int, default=agent_workflows.CALLS)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    agent_workflows.CALLS = args.peer_calls

    env = await start_local_environment()
    try:
        client = env.client
        registry = ToolRegistry.from_module("bench.bench_tools")
        tq = f"bench-{uuid.uuid4().hex[:6]}"

        # -- 1. run_code through an agent vs start_execution --------------------------------
        code_mode = DurableCodeMode(registry, client=client, task_queue=tq, index_search_attributes=False)
        codes: dict[int, str] = {}

        def model(messages, info):  # type: ignore[no-untyped-def]
            if any(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", [])):
                return ModelResponse(parts=[TextPart("done")])
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": codes["now"]})])

        agent = Agent(FunctionModel(model), capabilities=[code_mode])
        tags = iter(range(10**6))

        async def through_agent(_: int) -> None:
            codes["now"] = code_of(args.calls, next(tags))
            await agent.run("go")

        async def direct(_: int) -> None:
            request = CodeExecutionRequest(code=code_of(args.calls, next(tags)), index_search_attributes=False)
            outcome = await (await start_execution(client, request, task_queue=tq)).result()
            assert outcome.success, outcome.error

        async with CodeModeWorker(client, registry, task_queue=tq).running():
            await direct(0)  # warm: the Monty pool, the type checker
            await through_agent(0)
            t_agent, t_direct = await paired(through_agent, direct, args.repeat)
        r1 = ratio(t_agent, t_direct)
        print(f"1. {args.calls} sequential calls, median of {args.repeat} pairs")
        print(f"   run_code via Agent: {statistics.median(t_agent) * 1000:.0f} ms")
        print(f"   start_execution:    {statistics.median(t_direct) * 1000:.0f} ms")
        print(f"   ratio: {r1:.3f}x (goal <= 1.05x)")

        # -- 2. the peer under pydantic-ai's Temporal durability --------------------------
        if agent_workflows.peer is None:
            print("2. skipped: pip install -e '.[bench]' for pydantic-ai-harness's CodeMode")
            return
        store = store_of(client.data_converter)
        durable = await Client.connect(
            client.service_client.config.target_host,
            plugins=[PydanticAIPlugin(), CodeModePlugin(tools=registry, store=store)],
        )
        dq = f"agents-{uuid.uuid4().hex[:6]}"
        workflows = [agent_workflows.OursAgentWorkflow, agent_workflows.PeerAgentWorkflow, BareWorkflow]
        n = args.peer_calls

        expected = str(sum(range(n)))

        async def run_workflow(wf: object, arg: object) -> None:
            out = await durable.execute_workflow(wf, arg, id=f"bench-{uuid.uuid4().hex[:10]}", task_queue=dq)  # type: ignore[arg-type]
            # Every side must really have made its n calls (a failed run would look fast).
            assert expected in str(out), f"{wf} returned {str(out)[:300]}"

        async with Worker(durable, task_queue=dq, workflows=workflows, activities=[noop]):
            for wf in (agent_workflows.OursAgentWorkflow.run, agent_workflows.PeerAgentWorkflow.run):
                await run_workflow(wf, "warm")
            await run_workflow(BareWorkflow.run, n)
            ours_t: list[float] = []
            peer_t: list[float] = []
            bare_t: list[float] = []
            sides = [
                (lambda: run_workflow(agent_workflows.OursAgentWorkflow.run, "go"), ours_t),
                (lambda: run_workflow(agent_workflows.PeerAgentWorkflow.run, "go"), peer_t),
                (lambda: run_workflow(BareWorkflow.run, n), bare_t),
            ]
            for i in range(args.repeat):
                for fn, out in sides[i % 3 :] + sides[: i % 3]:
                    start = time.perf_counter()
                    await fn()
                    out.append(time.perf_counter() - start)
        per = {
            name: statistics.median(t) / n * 1000 for name, t in (("ours", ours_t), ("peer", peer_t), ("bare", bare_t))
        }
        print(f"2. an agent run of {n} sequential tool calls under Temporal durability, median of {args.repeat}")
        print(f"   bare activities (floor):   {per['bare']:.1f} ms/call")
        print(f"   ours (DurableCodeMode):    {per['ours']:.1f} ms/call = {ratio(ours_t, bare_t):.2f}x the floor")
        print(f"   peer (harness CodeMode):   {per['peer']:.1f} ms/call = {ratio(peer_t, bare_t):.2f}x the floor")
        print(f"   ours / peer: {ratio(ours_t, peer_t):.2f}x")
    finally:
        await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
    import os

    sys.stdout.flush()
    os._exit(0)
