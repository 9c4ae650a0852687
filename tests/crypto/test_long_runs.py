"""A long execution with keys, on a dev server whose limits make it continue as new many
times: the state it carries from run to run is stored in segments, and those are sealed like
checkpoints (nothing of the journal readable in the store); the run finishes, and a segment
under a key a worker lacks is reported as that, not as lost state."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from codemode.activities import ToolRegistry
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.activities.models import CheckpointRef
from codemode.client.executions import start_execution
from codemode.runtimes import ExecutionLimits
from codemode.storage.encryption import Keyring, UnknownEncryptionKey
from codemode.worker.converter import data_converter
from codemode.worker.dev_server import start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.workflows.test_rollover import LIMITS

from .conftest import K1, K2

MARKER = "MRKSEGMENTv8n"
CODE = 'm = lookup("MRK" + "SEGMENTv8n")\nt = 0\nfor i in range(300):\n    t = add(t, i)\n[t, m["city"]]'


@pytest.fixture(scope="module")
async def small_keyed_env(store) -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment(
        data_converter=data_converter(store, keys=Keyring.parse(K1)), dynamic_config=LIMITS
    )
    try:
        yield env
    finally:
        await env.shutdown()


async def test_carried_state_is_sealed(small_keyed_env: WorkflowEnvironment, store) -> None:
    client: Client = small_keyed_env.client
    registry = ToolRegistry.from_module("tests.workflows.tools_under_test")
    async with CodeModeWorker(client, registry, task_queue="small-keyed").running():
        handle = await start_execution(
            client,
            CodeExecutionRequest(code=CODE, limits=ExecutionLimits(max_tool_calls=5000, timeout_seconds=300)),
            task_queue="small-keyed",
        )
        outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [sum(range(300)), MARKER] and outcome.runs > 2
    desc = await handle.describe()
    scope = CheckpointScope("default", handle.id, desc.raw_description.workflow_execution_info.first_run_id)
    keys = await store.list_keys(bucket=store.bucket, prefix=scope.root)
    segments = [k for k in keys if "/seg/" in k]
    assert segments, keys
    for key in keys:
        blob = await store.get_object(bucket=store.bucket, key=key)
        assert MARKER.encode() not in blob, key
        if "/seg/" in key:
            assert blob.startswith(b"CMCK1\x02k1")

    # Read by a worker that lacks k1: the state is intact, the key is missing, and it says so.
    refs = [
        CheckpointRef(sha256=k.rsplit("/", 1)[1], size=len(await store.get_object(bucket=store.bucket, key=k)))
        for k in segments
    ]
    with pytest.raises(UnknownEncryptionKey, match="'k1'"):
        await CheckpointStore(store, keys=Keyring.parse(K2)).load(scope, refs[0], kind="seg")
    # With k1 back in the ring, the segments open, and one of them holds the marked call.
    opened = [await CheckpointStore(store, keys=Keyring.parse(f"{K2},{K1}")).load(scope, r, kind="seg") for r in refs]
    assert any(MARKER.encode() in blob for blob in opened)
