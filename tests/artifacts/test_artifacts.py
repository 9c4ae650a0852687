"""Artifacts through the workflow, the path a user takes: ``save_artifact`` on every runtime,
the outputs directory on CPython runtimes, the bytes in the object store, a reference in the
history."""

from __future__ import annotations

import hashlib

from codemode.activities.artifacts import ArtifactStore
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.worker.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest


async def _load(store, outcome, artifact, namespace="default") -> bytes:
    scope = CheckpointScope(namespace=namespace, execution_id=outcome.execution_id, first_run_id=artifact.run_id)
    return await ArtifactStore(CheckpointStore(store)).load(scope, artifact)


async def test_save_artifact_on_monty(client, task_queue, worker, store) -> None:
    code = (
        "r = save_artifact('notes/hello.txt', 'héllo')\n"
        "b = save_artifact('raw.bin', b'\\x00\\x01\\xff', mime_type='application/x-test')\n"
        "[r['size'], b['mime_type']]"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == [6, "application/x-test"]
    names = [(a.name, a.mime_type, a.size) for a in outcome.artifacts]
    assert names == [("notes/hello.txt", "text/plain", 6), ("raw.bin", "application/x-test", 3)]
    assert await _load(store, outcome, outcome.artifacts[0]) == "héllo".encode()
    assert await _load(store, outcome, outcome.artifacts[1]) == b"\x00\x01\xff"
    assert outcome.artifacts[1].sha256 == hashlib.sha256(b"\x00\x01\xff").hexdigest()


async def test_outputs_dir_on_python(client, task_queue, worker, store) -> None:
    code = (
        "import os\n"
        "open(os.path.join(OUTPUTS_DIR, 'a.csv'), 'w').write('x,y\\n1,2\\n')\n"
        "os.makedirs(OUTPUTS_DIR + '/sub', exist_ok=True)\n"
        "open(OUTPUTS_DIR + '/sub/b.bin', 'wb').write(bytes(range(256)))\n"
        "save_artifact('c.json', '{}')\n"
        "os.environ['CODEMODE_OUTPUTS_DIR']"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == "/tmp/outputs"
    assert [(a.name, a.mime_type) for a in outcome.artifacts] == [
        ("c.json", "application/json"),
        ("a.csv", "text/csv"),
        ("sub/b.bin", "application/octet-stream"),
    ]
    assert await _load(store, outcome, outcome.artifacts[2]) == bytes(range(256))
