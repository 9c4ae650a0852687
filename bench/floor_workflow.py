"""The floor for the Temporal benchmarks: a bare workflow running no-op activities."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench_noop")
async def noop(i: int) -> int:
    return i


@workflow.defn(name="BenchBareWorkflow")
class BareWorkflow:
    @workflow.run
    async def run(self, calls: int, concurrent: bool = False, rounds: int = 1) -> int:
        opts = {"start_to_close_timeout": timedelta(seconds=30)}
        if concurrent:
            total = 0
            for _ in range(rounds):
                results = await asyncio.gather(*(workflow.execute_activity(noop, i, **opts) for i in range(calls)))
                total += sum(results)
            return total
        total = 0
        for i in range(calls):
            total += await workflow.execute_activity(noop, i, **opts)
        return total


@workflow.defn(name="BenchBareLocalWorkflow")
class BareLocalWorkflow:
    """Like BareWorkflow, plus a no-op local activity after each activity (measures the SDK's
    own local-activity cost, which the durable path pays once per step)."""

    @workflow.run
    async def run(self, calls: int, payload: int = 0) -> int:
        total = 0
        blob = "x" * payload
        for i in range(calls):
            total += await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(seconds=30))
            await workflow.execute_local_activity(echo, blob, start_to_close_timeout=timedelta(seconds=30))
        return total


@activity.defn(name="bench_echo")
async def echo(blob: str) -> str:
    return blob


@workflow.defn(name="BenchBareCommandWorkflow")
class BareCommandWorkflow:
    """N sequential activities named ``bench_command``, each running a command (its worker
    defines it: ``bench/cli_tools.py``): a durable CLI call's floor as one piece."""

    @workflow.run
    async def run(self, calls: int) -> int:
        for i in range(calls):
            await workflow.execute_activity("bench_command", i, start_to_close_timeout=timedelta(seconds=30))
        return calls


@workflow.defn(name="BenchBareAgentWorkflow")
class BareAgentWorkflow:
    """The floor of one agent execution (``bench/agent_workload.py``): the same calls as the
    code, as groups of no-op activities (a group of one is a sequential call, a larger one is
    gathered), and before call ``park_at`` (when not -1) a wait for an ``approve`` signal."""

    def __init__(self) -> None:
        self._approved = False
        self._parked = False

    @workflow.signal
    def approve(self) -> None:
        self._approved = True

    @workflow.query
    def parked(self) -> bool:
        return self._parked and not self._approved

    @workflow.run
    async def run(self, groups: list[int], park_at: int = -1) -> int:
        opts = {"start_to_close_timeout": timedelta(seconds=30)}
        total = done = 0
        for size in groups:
            if done <= park_at < done + size:
                self._parked = True
                await workflow.wait_condition(lambda: self._approved)
            results = await asyncio.gather(*(workflow.execute_activity(noop, done + i, **opts) for i in range(size)))
            total += sum(results)
            done += size
        return total
