"""Retention of the object store (activities/retention.py): once executions close, a sweep
with keep=0 deletes every object they stored and nothing of an execution still running (a
run parked on an approval); the default keep (the namespace's retention) and a dry run
delete nothing; ``codemode gc --keep 0 --json`` reports the same as the sweep; the hourly
Schedule is created once and runs ``StorageSweepWorkflow`` to completion.

On a dev server and an object store of this module's own: a sweep considers every
execution in its store and the Schedule's id is fixed, so sharing the session's would make
the outcome depend on which other tests ran first."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from codemode.activities import ToolRegistry
from codemode.activities.retention import SweepInput, SweepReport, execution_prefixes, namespace_retention, sweep
from codemode.client.executions import start_execution
from codemode.runtimes import ExecutionLimits
from codemode.storage import FileBlobStore
from codemode.worker.converter import data_converter
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import SWEEP_EVERY, CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from codemode.workflows.sweep_workflow import SWEEP_SCHEDULE_ID, SWEEP_WORKFLOW
from tests.cli.runner import base_env, codemode

from .conftest import TOOLS_MODULE
from .test_approval import wait_for_state

#: A 40,000-row tool result (about 1.7 MB of JSON): claim-checked into the store, so a closed
#: execution leaves objects behind until retention.
ROWS = "rows = fetch_rows(40000)\nlen(rows)"
PARKED = "rows = fetch_rows(40000)\nr = transfer('bob', len(rows))\nr['to']"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's codemode data dir: the store is ``<it>/blobs``, as ``codemode gc`` finds it."""
    return Path(tmp_path_factory.mktemp("retention-data"))


@pytest.fixture(scope="module")
def store(data_dir: Path) -> FileBlobStore:
    return FileBlobStore(data_dir / "blobs")


@pytest.fixture(scope="module")
async def env(store: FileBlobStore) -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment(data_converter=data_converter(store))
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="module")
def client(env: WorkflowEnvironment) -> Client:
    return env.client


@pytest.fixture(scope="module")
def address(client: Client) -> str:
    return client.service_client.config.target_host


@pytest.fixture(scope="module")
async def worker(client: Client) -> AsyncIterator[CodeModeWorker]:
    w = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=f"ret-{uuid.uuid4().hex[:8]}")
    async with w.running():
        yield w


async def objects_of(store: FileBlobStore, execution_id: str) -> list[str]:
    keys: list[str] = []
    for prefix in execution_prefixes("default", execution_id):
        keys += await store.list_keys(bucket=store.bucket, prefix=prefix)
    return keys


async def snapshot(store: FileBlobStore, ids: list[str]) -> dict[str, list[str]]:
    return {i: await objects_of(store, i) for i in ids}


async def gc(address: str, data_dir: Path, *args: str) -> SweepReport:
    env = base_env(TEMPORAL_ADDRESS=address, CODEMODE_DATA_DIR=str(data_dir))
    result = await codemode("gc", *args, "--json", env=env)
    assert result.rc == 0, result
    return SweepReport.model_validate(json.loads(result.out))


async def test_sweep_deletes_closed_executions_only_past_keep(client, worker, store, data_dir, address) -> None:
    tq = worker.task_queue
    closed = []
    for runtime in ("monty", "python"):
        handle = await start_execution(client, CodeExecutionRequest(code=ROWS, runtime=runtime), task_queue=tq)
        outcome = await handle.result()
        assert outcome.success and outcome.output == 40000, outcome.error
        closed.append(handle.id)
    parked = await start_execution(client, CodeExecutionRequest(code=PARKED), task_queue=tq)
    status = await wait_for_state(parked, "awaiting_approval")
    everyone = [*closed, parked.id]

    before = await snapshot(store, everyone)
    for execution_id in closed:  # the rows, by reference; the checkpoints went at the end
        assert before[execution_id] and not [k for k in before[execution_id] if "/cp/" in k], before
    assert [k for k in before[parked.id] if "/cp/" in k], before  # parked: its checkpoint is live
    assert [k for k in before[parked.id] if k.startswith("v0/")], before

    # The default keep is the namespace's retention (24 h on the dev server): nothing is old enough.
    retention = await namespace_retention(client, "default")
    assert retention == timedelta(hours=24)
    report = await sweep(client, store, SweepInput())
    assert report.keep == retention and report.deleted == [] and report.objects_deleted == 0
    assert sorted(report.kept) == sorted(everyone)
    assert await snapshot(store, everyone) == before

    # A dry run names what keep=0 would delete and deletes nothing; `codemode gc` says the same.
    dry = await sweep(client, store, SweepInput(keep=timedelta(0), dry_run=True))
    assert dry.dry_run and sorted(dry.deleted) == sorted(closed) and dry.kept == [parked.id]
    assert dry.objects_deleted == 0
    assert await snapshot(store, everyone) == before
    dry_cli = await gc(address, data_dir, "--keep", "0", "--dry-run")
    assert dry_cli == dry
    assert await snapshot(store, everyone) == before

    # keep=0: every object of the closed executions goes; the parked one keeps all of its own.
    report = await sweep(client, store, SweepInput(keep=timedelta(0)))
    assert sorted(report.deleted) == sorted(closed) and report.kept == [parked.id]
    assert report.objects_deleted == sum(len(before[i]) for i in closed)
    after = await snapshot(store, everyone)
    assert after == {**before, **{i: [] for i in closed}}

    # The same through `codemode gc --keep 0 --json`, for an execution that closed since.
    handle = await start_execution(client, CodeExecutionRequest(code=ROWS), task_queue=tq)
    assert (await handle.result()).success
    stored = await objects_of(store, handle.id)
    assert stored
    report_cli = await gc(address, data_dir, "--keep", "0")
    assert report_cli.keep == timedelta(0) and not report_cli.dry_run
    assert report_cli.deleted == [handle.id] and report_cli.kept == [parked.id]
    assert report_cli.objects_deleted == len(stored)
    assert await objects_of(store, handle.id) == []
    assert await objects_of(store, parked.id) == before[parked.id]

    # Once the parked execution is decided and closes, it is swept like the others.
    await parked.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="ana"))
    assert (await parked.result()).output == "bob"
    report = await sweep(client, store, SweepInput(keep=timedelta(0)))
    assert report.deleted == [parked.id] and report.kept == []
    assert await objects_of(store, parked.id) == []
    assert await store.list_keys(bucket=store.bucket, prefix="") == []


async def test_sweep_schedule_is_created_once_and_runs(client, worker) -> None:
    assert await worker.ensure_sweep_schedule() is True
    assert await worker.ensure_sweep_schedule() is False
    schedule = client.get_schedule_handle(SWEEP_SCHEDULE_ID)
    try:
        desc = await schedule.describe()
        assert [i.every for i in desc.schedule.spec.intervals] == [SWEEP_EVERY]
        assert desc.schedule.action.workflow == SWEEP_WORKFLOW
        assert desc.schedule.action.task_queue == worker.task_queue

        await schedule.trigger()
        for _ in range(300):
            desc = await schedule.describe()
            if desc.info.recent_actions:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the triggered sweep never started")
        started = desc.info.recent_actions[-1].action
        handle = client.get_workflow_handle(started.workflow_id, result_type=SweepReport)
        report = await asyncio.wait_for(handle.result(), 60)
        assert report.keep == await namespace_retention(client, "default") and not report.dry_run
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    finally:
        await schedule.delete()


#: Limits lowered so that an execution of a few hundred calls continues as new many times
#: (the values of test_rollover.py).
ROLLOVER_LIMITS = {
    "limit.historyCount.suggestContinueAsNew": 150,
    "limit.historySize.suggestContinueAsNew": 150_000,
    "limit.historyCount.error": 600,
    "limit.historySize.error": 2_000_000,
}


@pytest.fixture(scope="module")
async def rollover_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Client, FileBlobStore]]:
    """A dev server that suggests continue-as-new every ~150 events, and a converter that
    claim-checks anything over 4 KB, so every run's carry is an object in the store (with
    the defaults, 4,096 events and 256 KB, the same happens past ~5,000 calls)."""
    store = FileBlobStore(Path(tmp_path_factory.mktemp("rollover-data")) / "blobs")
    env = await start_local_environment(
        data_converter=data_converter(store, threshold=4 * 1024), dynamic_config=ROLLOVER_LIMITS
    )
    try:
        yield env.client, store
    finally:
        await env.shutdown()


async def _stored_by_a_run_of(client: Client, store: FileBlobStore, calls: int) -> tuple[int, int]:
    """(bytes, runs) an execution of ``calls`` sequential calls keeps in the store."""
    w = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=f"roll-{uuid.uuid4().hex[:8]}")
    async with w.running():
        code = f"t = 0\nfor i in range({calls}):\n    t = add(t, i)\nt"
        limits = ExecutionLimits(max_tool_calls=calls + 10, timeout_seconds=300)
        handle = await start_execution(client, CodeExecutionRequest(code=code, limits=limits), task_queue=w.task_queue)
        outcome = await handle.result()
    assert outcome.success and outcome.output == calls * (calls - 1) // 2, outcome.error
    assert len(outcome.tool_calls) == calls  # the earlier runs' records read back from the store
    total = sum((store.root / store.bucket / key).stat().st_size for key in await objects_of(store, handle.id))
    return total, outcome.runs


async def test_what_a_long_execution_stores_grows_linearly_with_its_calls(rollover_client) -> None:
    """Each rollover stores that run's journal and call records once, as a segment, and the
    next run carries only references: what an execution keeps grows linearly with its calls.
    (Before, every carry held all records and the whole journal so far: quadratic, 90.9 MB
    kept by a 20,000-call execution whose calls and journal are ~5 MB.)"""
    client, store = rollover_client
    small, small_runs = await _stored_by_a_run_of(client, store, 200)
    large, large_runs = await _stored_by_a_run_of(client, store, 400)
    assert large_runs > small_runs > 5
    per_call_small, per_call_large = small / 200, large / 400
    # Quadratic growth would double the bytes per call from 200 to 400 calls.
    assert per_call_large <= 1.3 * per_call_small, (small, large, small_runs, large_runs)


async def test_sweep_deletes_what_a_closed_session_left(client, worker, store) -> None:
    """A session deletes its state when it closes; the sweep takes the rest once it is past
    keep: the claim-checked payloads of its history (here a cell's 300 KB input, which the SDK
    stores under no workflow type, as it does whatever a client sends a running workflow) and
    anything a close that failed half-way left under its scope."""
    from codemode.client.sessions import close_session, run_cell
    from codemode.workflows.session_models import session_workflow_id

    name = f"ret-{uuid.uuid4().hex[:8]}"
    outcome = await run_cell(client, name, "len(text)", inputs={"text": "x" * 300_000}, task_queue=worker.task_queue)
    assert outcome.output == 300_000, outcome.error
    await close_session(client, name)
    session_id = session_workflow_id(name)
    stray = f"codemode/ns/default/wi/{session_id.replace(':', '%3A')}/ri/some-run/cp/{'0' * 64}"
    await store.put_object(bucket=store.bucket, key=stray, data=b"left by a close that failed")
    left = await objects_of(store, session_id)
    assert stray in left and [k for k in left if "/wt/null/" in k], left  # the cell's Update
    report = await sweep(client, store, SweepInput(keep=timedelta(0)))
    assert session_id in report.deleted
    assert await objects_of(store, session_id) == []


async def test_artifacts_go_with_their_execution(client, worker, store) -> None:
    """An execution's artifacts stay while its history does, and the sweep removes them with it."""
    from codemode.activities.artifacts import ArtifactStore
    from codemode.activities.checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable

    code = "save_artifact('kept.txt', 'until retention')\nopen(OUTPUTS_DIR + '/also.txt', 'w').write('x')\n1"
    req = CodeExecutionRequest(code=code, runtime="python")
    handle = await start_execution(client, req, task_queue=worker.task_queue)
    outcome = await handle.result()
    assert outcome.success and len(outcome.artifacts) == 2, outcome
    arts = [k for k in await objects_of(store, handle.id) if "/art/" in k]
    assert len(arts) == 2
    kept = await sweep(client, store, SweepInput())  # the namespace's retention: too soon
    assert handle.id in kept.kept and len([k for k in await objects_of(store, handle.id) if "/art/" in k]) == 2
    report = await sweep(client, store, SweepInput(keep=timedelta(0)))
    assert handle.id in report.deleted
    assert await objects_of(store, handle.id) == []
    artifact = outcome.artifacts[0]
    scope = CheckpointScope(namespace="default", execution_id=handle.id, first_run_id=artifact.run_id)
    with pytest.raises(CheckpointUnusable, match="is no longer in"):
        await ArtifactStore(CheckpointStore(store)).load(scope, artifact)
