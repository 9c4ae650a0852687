"""The production storage path: workers on different machines share nothing but Temporal and
an S3-compatible store (SeaweedFS here). Two worker processes with separate data dirs, both
configured from the environment for the same bucket, finish each other's runs: worker A
starts a Monty run with a 20 MB heap and a 40,000-row tool result (parked on an approval)
and a python-runtime run (mid-flight), A is SIGKILLed, worker B takes both over and they
complete correctly. The checkpoint and the large payloads are objects in the bucket; nothing
is written under either data dir's blobs/; the test's own client decodes through an
S3-backed converter."""

from __future__ import annotations

import asyncio
import collections
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aioboto3
import pytest
from temporalio.client import Client

from codemode.activities.checkpoints import CheckpointScope
from codemode.activities.retention import execution_prefixes
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes import ExecutionLimits
from codemode.storage import S3BlobStore
from codemode.worker.converter import data_converter, store_of
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionStatus
from tests.s3_local import S3Endpoint

from .conftest import read_events
from .history_checks import chain_stats

ROOT = Path(__file__).resolve().parents[2]
LIMITS = ExecutionLimits(timeout_seconds=300, max_memory_bytes=1024**3, max_tool_calls=1000)

#: A 20 MB heap (as in test_large_state.HEAP), 40,000 rows from one tool, more calls, then a
#: call that needs a person: the run parks with its checkpoint (heap and rows) in the bucket.
MONTY = """
data = [str(i) * 40 for i in range(100_000)]
rows = fetch_rows(40000)
total = 0
for r in rows:
    total += r['amount']
t = 0
for i in range(5):
    t = add(t, i)
r = transfer('bob', total)
[len(data), sum(len(s) for s in data) > 19_000_000, len(rows), rows[-1]['id'], total, t, r['to']]
"""
#: CPython keeps its process live on the worker that runs it: after the kill, B rebuilds it by
#: journal replay, and the journal (40,000 rows) reaches B through the bucket.
PYTHON = """
rows = fetch_rows(40000)
total = sum(r['amount'] for r in rows)
t = 0
for i in range(12):
    t += slow_step(i, 0.3)
[len(rows), total, t]
"""
ROWS_TOTAL = sum(i % 997 for i in range(40000))


def s3_environment(s3: S3Endpoint, bucket: str, data_dir: Path) -> dict[str, str]:
    """A worker's environment: the bucket, endpoint and keys, and a data dir of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "CODEMODE_S3_"))}
    env.update(
        CODEMODE_S3_BUCKET=bucket,
        CODEMODE_S3_ENDPOINT_URL=s3.endpoint_url,
        AWS_ACCESS_KEY_ID=s3.access_key,
        AWS_SECRET_ACCESS_KEY=s3.secret_key,
        AWS_REGION=s3.region,
        CODEMODE_DATA_DIR=str(data_dir),
        PYTHONPATH=str(ROOT),
    )
    return env


def spawn_worker(address: str, task_queue: str, env: dict[str, str]) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/workflows/worker_proc.py"), address, task_queue],
        env=env,
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
    return proc


@pytest.fixture
async def s3_bucket_store(s3_server: S3Endpoint) -> AsyncIterator[S3BlobStore]:
    """A bucket of this test's own (the server is shared by the session), opened as a store."""
    session = aioboto3.Session(
        aws_access_key_id=s3_server.access_key, aws_secret_access_key=s3_server.secret_key, region_name=s3_server.region
    )
    store = await S3BlobStore.open(
        f"workers-{uuid.uuid4().hex[:8]}", endpoint_url=s3_server.endpoint_url, session=session, create_bucket=True
    )
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
def s3_client(client: Client, s3_bucket_store: S3BlobStore) -> Client:
    """A client of the session's dev server whose converter reads and writes the bucket."""
    config = client.config()
    config["data_converter"] = data_converter(s3_bucket_store)
    return Client(**config)


async def _objects(store: S3BlobStore, execution_id: str) -> dict[str, int]:
    """Key -> size of every object the execution has in the bucket."""
    sizes: dict[str, int] = {}
    for prefix in execution_prefixes("default", execution_id):
        paginator = store.client.get_paginator("list_objects_v2")
        async for page in paginator.paginate(Bucket=store.bucket, Prefix=prefix):
            sizes.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
    return sizes


def _files_under(path: Path) -> list[Path]:
    return [p for p in path.rglob("*") if p.is_file()] if path.exists() else []


async def _wait(predicate, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def test_two_workers_without_a_shared_filesystem_finish_each_others_runs(
    s3_server, s3_bucket_store, s3_client, temporal_address, task_queue, events_file, tmp_path
) -> None:
    store = s3_bucket_store
    assert store_of(s3_client.data_converter) is store
    dir_a, dir_b = tmp_path / "worker-a", tmp_path / "worker-b"
    env_a = {**s3_environment(s3_server, store.bucket, dir_a), "CODEMODE_TEST_EVENTS": str(events_file)}
    env_b = {**s3_environment(s3_server, store.bucket, dir_b), "CODEMODE_TEST_EVENTS": str(events_file)}

    first = spawn_worker(temporal_address, task_queue, env_a)
    second = None
    try:
        monty = await start_execution(s3_client, CodeExecutionRequest(code=MONTY, limits=LIMITS), task_queue=task_queue)

        async def monty_parked() -> bool:
            status = await monty.query("status", result_type=ExecutionStatus)
            return status.state == "awaiting_approval"

        await _wait(monty_parked, "the Monty run to park on its approval")
        status = await monty.query("status", result_type=ExecutionStatus)
        (pending,) = status.pending_approvals
        assert pending.tool == "transfer" and pending.args == ["bob", ROWS_TOTAL]

        # The parked run's state is in the bucket: its checkpoint (heap and rows, many MB)
        # and the 40,000 rows the tool returned, claim-checked by the SDK's S3 driver.
        first_run = (await monty.describe()).raw_description.workflow_execution_info.first_run_id
        scope = CheckpointScope("default", monty.id, first_run)
        parked = await _objects(store, monty.id)
        checkpoints = {k: v for k, v in parked.items() if k.startswith(scope.prefix)}
        assert checkpoints and max(checkpoints.values()) > 20_000_000, parked
        payloads = {k: v for k, v in parked.items() if k.startswith("v0/")}
        assert payloads and max(payloads.values()) > 1_500_000, parked  # the rows, by reference
        assert _files_under(dir_a / "blobs") == []

        python = await start_execution(
            s3_client, CodeExecutionRequest(code=PYTHON, runtime="python", limits=LIMITS), task_queue=task_queue
        )

        async def python_under_way() -> bool:
            ends = [e for e in read_events(events_file) if e["event"] == "end" and e["execution_id"] == python.id]
            return len(ends) >= 3

        await _wait(python_under_way, "the python run to get going")
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed = first.pid
        second = spawn_worker(temporal_address, task_queue, env_b)
        await monty.signal("approve", ApproveSignal(call_id=pending.call_id, by="ana"))
        monty_out, python_out = await asyncio.wait_for(asyncio.gather(monty.result(), python.result()), 240)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()

    # Both complete correctly, decoded here through the S3-backed converter.
    assert monty_out.success, monty_out.error
    assert monty_out.output == [100_000, True, 40000, 39999, ROWS_TOTAL, 10, "bob"]
    assert monty_out.tool_calls[-1].approval.by == "ana"
    assert python_out.success, python_out.error
    assert python_out.output == [40000, ROWS_TOTAL, sum(i * 10 for i in range(12))]
    rows_call = monty_out.tool_calls[0]
    assert rows_call.tool == "fetch_rows" and rows_call.result_size > 1_500_000

    # B did the work after the kill: the approved call, and the python run's remaining calls.
    events = read_events(events_file)
    transfer = [e for e in events if e["tool"] == "transfer" and e["execution_id"] == monty.id]
    assert transfer and {e["pid"] for e in transfer} == {second.pid}
    python_pids = {e["pid"] for e in events if e["execution_id"] == python.id and e["event"] == "end"}
    assert python_pids == {killed, second.pid}
    per_call = collections.defaultdict(set)
    for e in events:
        if e["execution_id"] == python.id:
            per_call[e["arg"]].add(e["call_id"])
    assert len(per_call) == 12 and all(len(ids) == 1 for ids in per_call.values())

    # B restored A's checkpoint from the bucket and rebuilt the python run by replay; the
    # audit (decoded through the bucket) shows the 40,000 rows and the fallback.
    monty_audit = await fetch_audit(s3_client, monty.id)
    assert len(monty_audit.calls[0].result) == 40000
    resumed = [s for s in monty_audit.steps if s.name == "sandbox_resume"]
    assert resumed[-1].via == "restored", [(s.via, s.fallback) for s in monty_audit.steps]
    python_audit = await fetch_audit(s3_client, python.id)
    assert len(python_audit.calls[0].result) == 40000
    assert any(s.via == "replayed" for s in python_audit.steps), [(s.via, s.fallback) for s in python_audit.steps]
    for handle in (monty, python):
        await chain_stats(s3_client, handle.id, worker_killed=True)

    # Everything lived in the bucket: payloads still there (until retention), the
    # checkpoints released at the end, and not one file under either worker's blobs/.
    after = await _objects(store, monty.id)
    assert not [k for k in after if k.startswith(scope.prefix)], after
    assert any(size > 1_500_000 for key, size in after.items() if key.startswith("v0/"))
    assert any(size > 1_500_000 for size in (await _objects(store, python.id)).values())
    for data_dir in (dir_a, dir_b):
        assert _files_under(data_dir / "blobs") == []
