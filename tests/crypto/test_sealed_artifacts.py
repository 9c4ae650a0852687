"""With keys set, an artifact's bytes are sealed in the store (bound to its execution), a
client with the key reads them back, and one without it cannot."""

from __future__ import annotations

import pytest

from codemode.activities import ToolRegistry
from codemode.activities.checkpoints import CheckpointUnusable
from codemode.client.artifacts import read_artifact
from codemode.client.executions import start_execution
from codemode.storage.encryption import UnknownEncryptionKey
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import K1

MARKER = "MRKARTIFACTq7z"


async def test_artifacts_are_sealed(keyed_client, task_queue, store) -> None:
    client = await keyed_client(K1)
    code = (
        "save_artifact('secret.txt', 'MRK' + 'ARTIFACTq7z and more')\n"
        "open(OUTPUTS_DIR + '/f.txt', 'w').write('MRK' + 'ARTIFACTq7z')"
    )
    async with CodeModeWorker(
        client, ToolRegistry.from_module("tests.crypto.secret_tools"), task_queue=task_queue
    ).running():
        outcome = await (
            await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        ).result()
    assert outcome.success, outcome.error
    keys = [
        k
        for k in await store.list_keys(bucket=store.bucket, prefix="codemode/")
        if "/art/" in k and outcome.execution_id in k
    ]
    assert len(keys) == 2
    for key in keys:
        blob = await store.get_object(bucket=store.bucket, key=key)
        assert blob.startswith(b"CMCK1") and MARKER.encode() not in blob
    secret, plain = outcome.artifacts
    assert await read_artifact(client, outcome.execution_id, secret) == f"{MARKER} and more".encode()
    assert await read_artifact(client, outcome.execution_id, plain) == MARKER.encode()
    keyless = await keyed_client(None)
    with pytest.raises((UnknownEncryptionKey, CheckpointUnusable)):
        await read_artifact(keyless, outcome.execution_id, secret)
