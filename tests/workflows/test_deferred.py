"""Deferred checkpoints (issue 11) on a real dev server with real workers.

With eager activity dispatch (the embedded server's setting) each call's activity runs on the
worker that holds the run live: most steps save no checkpoint. Without it (the OSS server's
default) and with two workers, a call's activity often lands on the other worker: that step
is left to the workflow, which rebuilds the run from the last checkpoint and the journal
entries since and then saves at every step of that run (each continue-as-new tries again). Either way every call runs once, the output and
the stdout are exact, and the history says which steps deferred."""

from __future__ import annotations

import collections
import uuid

from temporalio.client import Client
from temporalio.runtime import Runtime, TelemetryConfig

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes import ExecutionLimits
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome

from .conftest import TOOLS_MODULE, read_events
from .history_checks import chain_stats

CALLS = 300
#: A 1 MB heap every checkpoint carries, a print and a recorded tool call per step.
CODE = f"""
heap = ['x' * 100 for _ in range(10_000)]
total = 0
for i in range({CALLS}):
    print('step', i)
    total += slow_step(i, 0)
[total, len(heap)]
"""
LIMITS = ExecutionLimits(timeout_seconds=300, max_tool_calls=1000)


def _expect(outcome: ExecutionOutcome, events_file, calls: int) -> None:
    assert outcome.success, outcome.error
    assert outcome.output == [10 * sum(range(calls)), 10_000]
    assert outcome.stdout == "".join(f"step {i}\n" for i in range(calls))
    starts = collections.Counter(
        e["call_id"] for e in read_events(events_file) if e["event"] == "start" and e["execution_id"] == outcome.execution_id
    )
    assert len(starts) == calls and set(starts.values()) == {1}  # every call ran, and once


async def test_a_long_run_on_one_worker_saves_a_checkpoint_only_now_and_then(
    client: Client, task_queue: str, worker: CodeModeWorker, events_file
) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=CODE, limits=LIMITS), task_queue=task_queue)
    outcome = await handle.result()
    _expect(outcome, events_file, CALLS)
    audit = await fetch_audit(client, handle.id)
    steps = audit.steps
    deferred = sum(s.deferred for s in steps)
    # At most DEFER_ENTRIES (32) calls between saves, and fewer when a step ran long: most
    # steps deferred, some saved.
    assert deferred >= CALLS // 2 and len(steps) - deferred >= CALLS // 32
    await chain_stats(client, handle.id)  # no workflow task failed, no limit hit


async def test_two_workers_without_eager_dispatch_rebuild_the_run_where_it_is_not(
    converter, events_file
) -> None:
    # Runs also continue as new every ~200 events: a deferred step's tail rides in the carry.
    env = await start_local_environment(
        data_converter=converter, eager=False, dynamic_config={"limit.historyCount.suggestContinueAsNew": 200}
    )
    try:
        client = env.client
        queue = f"tq-{uuid.uuid4().hex[:8]}"
        registry = ToolRegistry.from_module(TOOLS_MODULE)
        # A second client on a Runtime of its own: the SDK allows one worker per task queue
        # and Runtime, and two Runtimes are what two worker machines would be.
        other = await Client.connect(
            client.service_client.config.target_host, data_converter=converter, runtime=Runtime(telemetry=TelemetryConfig())
        )
        a, b = CodeModeWorker(client, registry, task_queue=queue), CodeModeWorker(other, registry, task_queue=queue)
        calls = 120
        code = CODE.replace(f"range({CALLS})", f"range({calls})")
        async with a.running(), b.running():
            handles = [
                await start_execution(client, CodeExecutionRequest(code=code, limits=LIMITS), task_queue=queue)
                for _ in range(4)
            ]
            outcomes = [await h.result() for h in handles]
        rebuilt = 0
        for handle, outcome in zip(handles, outcomes):
            _expect(outcome, events_file, calls)
            audit = await fetch_audit(client, handle.id)
            elsewhere = [e for e in audit.events if "not on this worker" in e.text]
            rebuilt += len(elsewhere)
            # After its first miss a run saves at every step: one miss per run at most.
            assert len(elsewhere) <= len(audit.runs)
            stats = await chain_stats(client, handle.id)
            assert stats.runs >= 3
        assert rebuilt >= 1  # with two workers and no eager dispatch, some call landed elsewhere
    finally:
        await env.shutdown()
