"""The sandbox sweep on every provider a worker serves: docker (podman), e2b, blaxel and modal
(their local servers, driven by the unmodified SDKs).

One worker holds two runs parked on an approval and a third in the middle of its first step
when it is SIGKILLed. On another worker the first parked run is cancelled (its release frees
its sandbox), the second terminated (no release runs), and the third goes on by a retry in a
new sandbox until it parks. One sweep (the ``codemode-sandbox-sweep`` Schedule's workflow, as
the web UI shows it) destroys at once the sandbox the killed step left, while its run is still
open, because the run's checkpoint names the other sandbox, and the terminated run's; it keeps
the parked one. After the run, the provider holds nothing of it, and nothing of a closed
execution."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.service import RPCError

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest

from .conftest import TOOLS_MODULE, read_events
from .sandbox_providers import Provider, provider_fixture, provider_server_fixture, sweep  # noqa: F401 (fixtures)
from .test_approval import wait_for_state
from .test_crash import spawn_worker

#: The first step sleeps in the sandbox, so the worker can be killed in the middle of it.
SLOW_START = "import time\nprint('started')\ntime.sleep(3)\na = slow_step(1, 0)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"
CODE = "a = slow_step(1, 0)\nr = transfer('bob', a)\n[a, r['to']]"


async def only_open_executions_hold_sandboxes(client: Client, provider: Provider) -> None:
    for sandbox, execution_id in (await provider.sandboxes()).items():
        desc = await client.get_workflow_handle(execution_id).describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING, (sandbox, execution_id, desc.status)


@contextlib.contextmanager
def killed_at_the_end(*procs: Any) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def test_a_worker_killed_mid_step_or_while_parked_leaves_nothing_after_one_sweep(
    provider: Provider, client, temporal_address, task_queue, events_file, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="codemode")
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    first = spawn_worker(temporal_address, task_queue, events_file)
    with killed_at_the_end(first):
        cancelled, terminated = [
            await start_execution(client, CodeExecutionRequest(code=CODE, runtime=provider.name), task_queue=task_queue)
            for _ in range(2)
        ]
        for parked_run in (cancelled, terminated):
            await wait_for_state(parked_run, "awaiting_approval", timeout=60)
        (left_behind,) = await provider.of(terminated.id)
        handle = await start_execution(
            client, CodeExecutionRequest(code=SLOW_START, runtime=provider.name), task_queue=task_queue
        )
        (orphan,) = await provider.wait_for(handle.id, 1)  # its first step is under way
        labels = await provider.labels(orphan)  # who made it: the execution, the step attempt, where
        assert labels["codemode.execution"] == handle.id and labels["codemode.step"].endswith("#1"), labels
        assert labels["codemode.namespace"] == client.namespace and labels["codemode.cluster"], labels
        first.send_signal(signal.SIGKILL)
        first.wait()
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        await cancelled.cancel()  # its release frees its sandbox
        with pytest.raises(WorkflowFailureError):
            await asyncio.wait_for(cancelled.result(), 60)
        await terminated.terminate("gone")  # no release step runs: only the sweep can free it
        await wait_for_state(handle, "awaiting_approval", timeout=90)  # the retry, in a new sandbox
        both = await provider.wait_for(handle.id, 2)
        (parked,) = [name for name in both if name != orphan]

        report = await sweep(client, task_queue)
        removed = {e.sandbox: e for e in report.removed}
        assert orphan in removed and parked not in removed, report
        assert removed[orphan].execution == handle.id and "never reported back" in removed[orphan].reason, report
        # (the worker's own sweep at start may have been the one: it logs the same report)
        said = removed[left_behind].reason if left_behind in removed else caplog.text
        assert f"execution {terminated.id} is closed (terminated)" in said, (report, caplog.text)
        assert any(e.sandbox == parked and "names it" in e.reason for e in report.kept), report
        assert await provider.of(handle.id) == [parked]
        assert await provider.of(cancelled.id) == [] and await provider.of(terminated.id) == []

        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
        await sweep(client, task_queue)
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    starts = collections.Counter(
        e["tool"] for e in read_events(events_file) if e["event"] == "start" and e["execution_id"] == handle.id
    )
    assert starts == {"slow_step": 1, "transfer": 1}  # each tool ran once
    assert await provider.of(handle.id) == []
    await only_open_executions_hold_sandboxes(client, provider)


async def test_the_sandbox_sweep_schedule_is_created_once_and_its_runs_show_the_report(client, worker) -> None:
    from codemode.activities.sandbox_sweep import SandboxSweepReport
    from codemode.worker.worker import SWEEP_EVERY
    from codemode.workflows.sweep_workflow import SANDBOX_SWEEP_SCHEDULE_ID, SANDBOX_SWEEP_WORKFLOW

    schedule = client.get_schedule_handle(SANDBOX_SWEEP_SCHEDULE_ID)
    with contextlib.suppress(RPCError):  # another test's worker on this server made it already
        await schedule.delete()
    assert await worker.ensure_sandbox_sweep_schedule() is True
    assert await worker.ensure_sandbox_sweep_schedule() is False
    try:
        desc = await schedule.describe()
        assert [i.every for i in desc.schedule.spec.intervals] == [SWEEP_EVERY]
        assert desc.schedule.action.workflow == SANDBOX_SWEEP_WORKFLOW
        await schedule.trigger()
        for _ in range(300):
            desc = await schedule.describe()
            if desc.info.recent_actions:
                break
            await asyncio.sleep(0.1)
        started = desc.info.recent_actions[-1].action
        handle = client.get_workflow_handle(started.workflow_id, result_type=SandboxSweepReport)
        report = await asyncio.wait_for(handle.result(), 60)
        assert not report.dry_run
        meta = await handle.query("__temporal_workflow_metadata")  # the UI's Current Details
        assert meta.current_details.startswith(f"**{len(report.removed)} removed**, {len(report.kept)} kept")
    finally:
        await schedule.delete()


@pytest.mark.parametrize("provider_server", ["e2b"], indirect=True)
async def test_the_sweep_leaves_another_temporal_clusters_sandboxes_alone(provider: Provider, client, store) -> None:
    """Two dev servers on one machine share a provider account (or a Docker engine), and both
    call their namespace "default": a sandbox labelled with another cluster is not ours to
    judge; one labelled with ours whose execution Temporal does not know is an orphan. (The
    sweep itself, without a worker whose own start sweep could run first.)"""
    from codemode.activities.checkpoints import CheckpointStore
    from codemode.activities.sandbox_sweep import SandboxSweepInput, sweep_sandboxes

    labels = {"codemode": "1", "codemode.execution": "exec-elsewhere", "codemode.namespace": "default"}
    theirs = await provider.runtime.Sandbox.create(metadata={**labels, "codemode.cluster": "another-cluster"})
    ours = await provider.runtime.Sandbox.create(metadata=labels)
    try:
        report = await sweep_sandboxes(
            client, {"e2b": provider.runtime}, CheckpointStore(store), SandboxSweepInput(young_seconds=0)
        )
        assert [e.sandbox for e in report.removed] == [ours.sandbox_id], report
        assert "execution exec-elsewhere is unknown to Temporal" in report.removed[0].reason
        assert theirs.sandbox_id not in {e.sandbox for e in report.kept}  # not judged at all
        assert list(await provider.sandboxes()) == [theirs.sandbox_id]
    finally:
        await provider.runtime.destroy({"sandbox_id": theirs.sandbox_id})
