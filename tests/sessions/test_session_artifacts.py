"""A session cell keeps its artifacts: each cell's outcome lists the files that cell handed
back (``save_artifact``, and on CPython runtimes the outputs directory), never an earlier
cell's again, on every runtime with sessions."""

from __future__ import annotations

from codemode.activities.artifacts import ArtifactStore
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.client.sessions import close_session, run_cell
from codemode.storage import key_segment

from .conftest import no_e2b_sandbox_left

FIRST = "save_artifact('first.txt', 'one')\n{cpython_write}'cell 1'"
SECOND = "{cpython_write}save_artifact('second.txt', 'two')\n'cell 2'"


async def test_each_cell_keeps_its_own_artifacts(client, task_queue, worker, store, runtime, session_name) -> None:
    cpython = runtime != "monty"

    def code(template: str, name: str) -> str:
        write = f"open(OUTPUTS_DIR + '/{name}', 'w').write('{name}')\n" if cpython else ""
        return template.format(cpython_write=write)

    first = await run_cell(client, session_name, code(FIRST, "a.txt"), runtime=runtime, task_queue=task_queue)
    second = await run_cell(client, session_name, code(SECOND, "b.txt"), runtime=runtime, task_queue=task_queue)
    await close_session(client, session_name)
    await no_e2b_sandbox_left()  # (closing kills the e2b session's sandbox)
    assert first.success and second.success, (first.error, second.error)
    expected = (["first.txt", "a.txt"], ["second.txt", "b.txt"]) if cpython else (["first.txt"], ["second.txt"])
    assert [a.name for a in first.artifacts] == expected[0]
    assert [a.name for a in second.artifacts] == expected[1]
    artifacts = ArtifactStore(CheckpointStore(store))
    for outcome in (first, second):
        for artifact in outcome.artifacts:
            scope = CheckpointScope("default", outcome.execution_id, artifact.run_id)
            data = await artifacts.load(scope, artifact)
            assert data == {"first.txt": b"one", "second.txt": b"two"}.get(artifact.name, artifact.name.encode())


async def test_a_rebuilt_python_session_saves_nothing_again(
    client, temporal_address, task_queue, events_file, store
) -> None:
    """The worker holding a python session dies between two cells: the next cell rebuilds the
    session by replaying the first, whose saves the journal answers (nothing stored again)."""
    import signal
    import uuid

    from ..workflows.test_crash import spawn_worker

    name = f"art-{uuid.uuid4().hex[:8]}"
    first_code = "save_artifact('first.txt', 'one')\nopen(OUTPUTS_DIR + '/a.txt', 'w').write('a')\nx = 41\nx"
    procs = [spawn_worker(temporal_address, task_queue, events_file)]
    try:
        first = await run_cell(client, name, first_code, runtime="python", task_queue=task_queue)
        assert first.success, first.error
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait()
        procs.append(spawn_worker(temporal_address, task_queue, events_file))
        second = await run_cell(
            client, name, "save_artifact('second.txt', str(x + 1))\nx + 1", runtime="python", task_queue=task_queue
        )
        assert second.success and second.output == 42, second.error
        await close_session(client, name)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [a.name for a in first.artifacts] == ["first.txt", "a.txt"]
    assert [a.name for a in second.artifacts] == ["second.txt"]  # the replayed first cell added nothing
    keys = [k for k in await store.list_keys(bucket=store.bucket, prefix="codemode/") if "/art/" in k]
    assert len([k for k in keys if f"/wi/{key_segment(first.execution_id)}/" in k]) == 2
