"""Artifacts through the workflow, the path a user takes: ``save_artifact`` on every runtime,
the outputs directory on CPython runtimes, the bytes in the object store, a reference in the
history."""

from __future__ import annotations

import hashlib

import pytest

from codemode.activities.artifacts import ArtifactStore
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.client.executions import start_execution
from codemode.runtimes import ExecutionLimits
from codemode.runtimes.artifacts import SIGNATURE as SAVE_SIGNATURE
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


def _stored_artifacts(keys: list[str], execution_id: str) -> list[str]:
    return [k for k in keys if f"/wi/{execution_id}/" in k and "/art/" in k]


async def test_a_5mb_csv_never_enters_the_history(client, task_queue, worker, store) -> None:
    code = (
        "rows = ['id,region,amount'] + [f'{i},{(\"north\", \"south\")[i % 2]},{i % 997:08d}' for i in range(250_000)]\n"
        "text = '\\n'.join(rows)\n"
        "open(OUTPUTS_DIR + '/rows.csv', 'w').write(text)\n"
        "len(text)"
    )
    req = CodeExecutionRequest(code=code, runtime="python")
    handle = await start_execution(client, req, task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    [csv] = outcome.artifacts
    assert csv.size == outcome.output and csv.size > 5_000_000 and csv.mime_type == "text/csv"
    assert len(await _load(store, outcome, csv)) == csv.size
    history = await handle.fetch_history()
    sizes = [e.ByteSize() for e in history.events]
    # Every event holds references and call records only: far under a single call's bound.
    assert max(sizes) < 8_000, sorted(sizes)[-3:]
    info = (await handle.describe()).raw_description.workflow_execution_info
    assert info.external_payload_count == 0  # not even claim-checked: the bytes went to the store directly
    assert info.history_size_bytes < 50_000


async def test_caps_are_typed_errors_in_the_code(client, task_queue, store, monkeypatch) -> None:
    from codemode.activities import ToolRegistry
    from codemode.worker.worker import CodeModeWorker
    from tests.workflows.conftest import TOOLS_MODULE

    monkeypatch.setenv("CODEMODE_ARTIFACT_MAX_BYTES", "1000")
    monkeypatch.setenv("CODEMODE_ARTIFACTS_MAX_BYTES", "1500")
    code = (
        "seen = []\n"
        "try:\n    save_artifact('big.bin', b'x' * 2000)\nexcept ValueError as e:\n    seen.append(str(e))\n"
        "save_artifact('a.bin', b'a' * 900)\n"
        "save_artifact('a.bin', b'a' * 900)\n"  # the same bytes again take no more room
        "try:\n    save_artifact('b.bin', b'b' * 900)\nexcept ValueError as e:\n    seen.append(str(e))\n"
        "seen"
    )
    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue)
    async with worker.running():
        outcome = await (await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)).result()
        assert outcome.success, outcome.error
        per_file, per_execution = outcome.output
        assert (
            per_file
            == "artifact 'big.bin' is 2.0 KB, over the 1000 B limit for one artifact (CODEMODE_ARTIFACT_MAX_BYTES)"
        )
        assert per_execution.startswith("artifact 'b.bin' (900 B) would bring this execution's artifacts to 1.8 KB")
        assert per_execution.endswith("over the 1.5 KB limit per execution (CODEMODE_ARTIFACTS_MAX_BYTES)")
        assert [a.name for a in outcome.artifacts] == ["a.bin"]
        errors = [c for c in outcome.tool_calls if c.status == "error"]
        assert [(c.tool, c.error.type) for c in errors] == [("save_artifact", "ValueError")] * 2
        keys = await store.list_keys(bucket=store.bucket, prefix="codemode/")
        assert len(_stored_artifacts(keys, outcome.execution_id)) == 1  # refused bytes are never stored
        # A file in the outputs directory over the cap fails the run with the same error.
        code = "open(OUTPUTS_DIR + '/big.txt', 'w').write('y' * 5000)\n'done'"
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        failed = await handle.result()
    assert not failed.success and failed.error.type == "ValueError"
    assert "artifact 'big.txt' is 4.9 KB, over the 1000 B limit for one artifact" in failed.error.message


PLOT = """
import hashlib, os
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(4, 3), dpi=80)
ax.plot([1, 2, 3, 4], [3, 1, 4, 1], marker="o")
ax.set_title("durable chart")
path = os.path.join(OUTPUTS_DIR, "chart.png")
fig.savefig(path, metadata={"Software": None})
hashlib.sha256(open(path, "rb").read()).hexdigest()
"""


async def test_a_matplotlib_png_comes_back_byte_identical(client, task_queue, worker, store) -> None:
    pytest.importorskip("matplotlib")
    # matplotlib maps more than the default 256 MB of address space (RLIMIT_AS) on import.
    limits = ExecutionLimits(max_memory_bytes=2 * 1024**3, timeout_seconds=120)
    req = CodeExecutionRequest(code=PLOT, runtime="python", limits=limits)
    handle = await start_execution(client, req, task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    [png] = outcome.artifacts
    assert (png.name, png.mime_type) == ("chart.png", "image/png")
    data = await _load(store, outcome, png)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    # What the code wrote, what the reference says and what the store gives back are one.
    assert hashlib.sha256(data).hexdigest() == png.sha256 == outcome.output


async def test_an_artifact_saved_before_a_sigkill_is_not_saved_twice(
    client, temporal_address, task_queue, events_file, store
) -> None:
    """The worker holding the live process dies after the code saved an artifact and wrote a
    file: the replay answers the save from the journal, and the file is handed back once."""
    import asyncio
    import signal
    import time

    from tests.workflows.conftest import read_events
    from tests.workflows.test_crash import spawn_worker

    code = (
        "first = save_artifact('early.txt', 'saved before the kill')\n"
        "open(OUTPUTS_DIR + '/written.txt', 'w').write('written before the kill')\n"
        "t = 0\nfor i in range(5):\n    t += slow_step(i, 0.3)\n"
        "save_artifact('late.txt', str(t))\n"
        "first['sha256']"
    )
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=code, runtime="python"), task_queue=task_queue)
        deadline = time.monotonic() + 60
        while sum(e["event"] == "end" for e in read_events(events_file) if e["execution_id"] == handle.id) < 2:
            assert time.monotonic() < deadline, "the execution never got going"
            await asyncio.sleep(0.02)
        first.send_signal(signal.SIGKILL)  # it holds the live process, mid-execution
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        outcome = await asyncio.wait_for(handle.result(), timeout=120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert [a.name for a in outcome.artifacts] == ["early.txt", "late.txt", "written.txt"]
    assert outcome.output == outcome.artifacts[0].sha256
    saves = [c for c in outcome.tool_calls if c.tool == "save_artifact"]
    assert [c.args[0] for c in saves] == ["early.txt", "late.txt", "written.txt"]  # one record each
    keys = _stored_artifacts(await store.list_keys(bucket=store.bucket, prefix="codemode/"), handle.id)
    assert len(keys) == 3  # one object per artifact, whatever ran twice
    assert [await _load(store, outcome, a) for a in outcome.artifacts] == [
        b"saved before the kill",
        b"100",
        b"written before the kill",
    ]
    assert any(e["pid"] != first.pid for e in read_events(events_file) if e["execution_id"] == handle.id)
    # Only one step ever answered the early save; the rebuilt process got it from the journal.
    history = await handle.fetch_history()
    completed = [  # the steps' results: activities', and the first step's local-activity marker (issue 49)
        e.activity_task_completed_event_attributes.result.SerializeToString()
        if e.WhichOneof("attributes") == "activity_task_completed_event_attributes"
        else e.marker_recorded_event_attributes.SerializeToString()
        for e in history.events
        if e.WhichOneof("attributes") in ("activity_task_completed_event_attributes", "marker_recorded_event_attributes")
    ]
    assert sum(b"early.txt" in r for r in completed) == 1


async def test_the_audit_shows_each_save(client, task_queue, worker) -> None:
    from codemode.client import display
    from codemode.client.histories.audit import fetch_audit

    code = (
        "save_artifact('one.txt', 'one')\n"
        "try:\n    save_artifact('../x', 'no')\nexcept ValueError as e:\n    print(e)\n"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success and outcome.stdout == "save_artifact(): name '../x' must not have empty, '.' or '..' parts\n"
    audit = await fetch_audit(client, handle.id)
    assert [(c.tool, c.status) for c in audit.calls] == [("save_artifact", "ok"), ("save_artifact", "error")]
    assert audit.calls[0].result["name"] == "one.txt"
    text = "\n".join(display.audit_lines(audit))
    assert "→ save_artifact('one.txt', data={'sha256': " in text, text
    assert "✗ ValueError: save_artifact(): name '../x' must not have empty" in text


OTHER = (
    "import os, sys\n"
    "open(os.path.join(OUTPUTS_DIR, 'out.txt'), 'w').write('from ' + sys.platform)\n"
    "save_artifact('direct.bin', b'\\x00\\x01')\n"
    "OUTPUTS_DIR"
)


@pytest.mark.parametrize("runtime", ["docker", "pyodide"])
async def test_outputs_and_save_artifact_on_other_cpython_runtimes(client, task_queue, worker, store, runtime) -> None:
    if runtime == "docker":
        from tests.docker_engine import engine

        engine()  # the session's podman (sets DOCKER_HOST and CODEMODE_DOCKER_IMAGE)
    handle = await start_execution(client, CodeExecutionRequest(code=OTHER, runtime=runtime), task_queue=task_queue)
    outcome = await handle.result()
    assert outcome.success, outcome.error
    assert outcome.output == "/tmp/outputs"
    assert [a.name for a in outcome.artifacts] == ["direct.bin", "out.txt"]
    assert await _load(store, outcome, outcome.artifacts[0]) == b"\x00\x01"
    platform = "emscripten" if runtime == "pyodide" else "linux"
    assert await _load(store, outcome, outcome.artifacts[1]) == f"from {platform}".encode()


def test_every_prompt_names_save_artifact_and_cpython_ones_the_outputs_directory() -> None:
    from codemode.activities import ToolRegistry
    from codemode.runtimes import code_mode_prompt

    for runtime in ("monty", "python", "docker", "e2b", "pyodide"):
        prompt = code_mode_prompt(runtime, ToolRegistry.from_module("tests.workflows.tools_under_test").signatures())
        assert prompt.count("def save_artifact(name: str, data: bytes | str, mime_type: str | None = None)") == 1
        assert ("OUTPUTS_DIR" in prompt) is (runtime != "monty"), runtime
    registry = ToolRegistry.from_module("tests.workflows.tools_under_test")
    assert "save_artifact" not in registry.select(None) and "save_artifact" in registry.for_execution(["lookup"])
    assert registry["save_artifact"].signature.name == "save_artifact"  # get_schema finds it
    with pytest.raises(ValueError, match="reserved"):

        def save_artifact(name: str) -> None: ...

        registry.register(save_artifact)


async def test_artifacts_in_an_s3_bucket(s3_bucket_store, s3_client, task_queue) -> None:
    """The production store: the bytes are objects in the bucket, read back through the client."""
    from codemode.activities import ToolRegistry
    from codemode.client.artifacts import read_artifact
    from codemode.worker.worker import CodeModeWorker
    from tests.workflows.conftest import TOOLS_MODULE

    code = "save_artifact('s3.bin', b'\\x01' * 1000)\nopen(OUTPUTS_DIR + '/t.txt', 'w').write('tt')\n1"
    async with CodeModeWorker(s3_client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue).running():
        req = CodeExecutionRequest(code=code, runtime="python")
        outcome = await (await start_execution(s3_client, req, task_queue=task_queue)).result()
    assert outcome.success, outcome.error
    keys = await s3_bucket_store.list_keys(bucket=s3_bucket_store.bucket, prefix="codemode/")
    assert len(_stored_artifacts(keys, outcome.execution_id)) == 2
    assert [await read_artifact(s3_client, outcome.execution_id, a) for a in outcome.artifacts] == [b"\x01" * 1000, b"tt"]


async def test_an_unsandboxed_run_keeps_its_outputs_to_itself() -> None:
    """The python runtime without a sandbox (isolation="none") has no private /tmp: its outputs
    directory is under the run's own TMPDIR, so two runs never hand back each other's files."""
    import warnings

    from codemode.runtimes.python import PythonRuntime
    from codemode.runtimes.types import ExecutionResult

    code = "open(OUTPUTS_DIR + '/mine.txt', 'w').write('x')\nOUTPUTS_DIR"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rt = PythonRuntime(isolation="none")
    async with rt:
        dirs = []
        for _ in range(2):
            execution = await rt.execute(code, functions={"save_artifact": SAVE_SIGNATURE})
            event = await execution.next_batch()
            assert [(c.function_name, c.args) for c in event] == [("save_artifact", ["mine.txt"])]
            await execution.provide_result({}, call_id=event[0].call_id)
            done = await execution.next_batch()
            assert isinstance(done, ExecutionResult)
            dirs.append(done.output)
            await execution.close()
    assert dirs[0] != dirs[1] and not dirs[0].startswith("/tmp/outputs")
