"""Where a fresh execution's first tool call spends its time, monty against python, read from
the histories' event times (issue 49's lever: python's first step is a regular activity, so its
first call waits for an activity task and a second workflow task that Monty's local start does
not).

N agents (2 by default: little queueing) each run ``--runs`` new programs on each runtime,
alternating. For every run, from its history:

* monty: start -> first workflow task started; that task's start -> the first tool scheduled
  (the local start step, type check and Monty included, in the same workflow task);
* python: start -> the start step scheduled (the first workflow task); scheduled -> started
  (dispatch of the step's activity task); started -> completed (the step: the interpreter, the
  code up to its first call); completed -> the first tool scheduled (the second workflow task).

    python bench/first_call.py [--agents 2] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client  # noqa: E402

from bench.agent_workload import agent_code  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.names import RESERVED, SANDBOX_START  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def ms(a, b) -> float:  # type: ignore[no-untyped-def]
    return (b.ToDatetime() - a.ToDatetime()).total_seconds() * 1000


async def split(client: Client, wid: str) -> dict[str, float]:
    """The first call's time, in parts, from the run's history (ms)."""
    events = (await client.get_workflow_handle(wid).fetch_history()).events
    t0 = events[0].event_time
    parts: dict[str, float] = {}
    step_sched = step_started = step_done = wft_started = None
    for e in events:
        if e.HasField("workflow_task_started_event_attributes") and wft_started is None:
            wft_started = e.event_time
            parts["start -> first workflow task started"] = ms(t0, e.event_time)
        if e.HasField("activity_task_scheduled_event_attributes"):
            name = e.activity_task_scheduled_event_attributes.activity_type.name
            if name == SANDBOX_START:
                step_sched = (e.event_id, e.event_time)
                parts["start -> start step scheduled (workflow task 1)"] = ms(t0, e.event_time)
            elif name not in RESERVED:
                if step_done is not None:
                    parts["step completed -> first tool scheduled (workflow task 2)"] = ms(step_done, e.event_time)
                elif wft_started is not None:
                    parts["workflow task 1 started -> first tool scheduled (local start step)"] = ms(wft_started, e.event_time)
                parts["start -> first tool scheduled"] = ms(t0, e.event_time)
                break
        if e.HasField("activity_task_started_event_attributes") and step_sched is not None:
            if e.activity_task_started_event_attributes.scheduled_event_id == step_sched[0]:
                step_started = e.event_time
                parts["step scheduled -> started (dispatch)"] = ms(step_sched[1], e.event_time)
        if e.HasField("activity_task_completed_event_attributes") and step_sched is not None:
            if e.activity_task_completed_event_attributes.scheduled_event_id == step_sched[0]:
                step_done = e.event_time
                if step_started is not None:
                    parts["step started -> completed (the step)"] = ms(step_started, e.event_time)
    return parts


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}", flush=True)
    env = await start_local_environment()
    client: Client = env.client
    tq = f"first-{uuid.uuid4().hex[:6]}"
    worker = CodeModeWorker(client, ToolRegistry.from_module("bench.agent_tools"), task_queue=tq, notify=None,
                            approvers=None)
    seeds = iter(range(10**9))
    ids: dict[str, list[str]] = {"monty": [], "python": []}

    async def one(runtime: str) -> None:
        p = agent_code(next(seeds), approval=False)
        h = await start_execution(client, CodeExecutionRequest(code=p.code, runtime=runtime), task_queue=tq)
        out = await h.result()
        assert out.success, out.error
        ids[runtime].append(h.id)

    try:
        async with worker.running():
            for runtime in ("monty", "python"):  # warm: pools, the checker, the warm interpreters
                for _ in range(3):
                    await one(runtime)
            ids = {"monty": [], "python": []}

            async def agent() -> None:
                for r in range(args.runs):
                    for runtime in (("monty", "python") if r % 2 == 0 else ("python", "monty")):
                        await one(runtime)

            await asyncio.gather(*(agent() for _ in range(args.agents)))
            splits = {rt: [await split(client, wid) for wid in wids] for rt, wids in ids.items()}
    finally:
        await env.shutdown()
    print(f"load average after: {os.getloadavg()}\n")
    print(f"First tool call of a fresh execution, N = {args.agents}, {args.runs} runs per agent and runtime "
          "(p50 ms, [p25-p75])\n")
    print("| runtime | part | p50 ms | p25-p75 |")
    print("|---|---|---|---|")
    for rt, rows in splits.items():
        keys = list(dict.fromkeys(k for r in rows for k in r))
        for k in keys:
            xs = sorted(r[k] for r in rows if k in r)
            q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
            print(f"| {rt} | {k} | {statistics.median(xs):.1f} | {q[0]:.1f}-{q[2]:.1f} |")
    first = {rt: statistics.median(r["start -> first tool scheduled"] for r in rows) for rt, rows in splits.items()}
    print(f"\npython / monty first call (p50): {first['python'] / first['monty']:.2f}x "
          f"({first['python']:.0f} vs {first['monty']:.0f} ms); goal (issue 49) <= 1.5x")


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
