"""A session cell keeps its artifacts: each cell's outcome lists the files that cell handed
back (``save_artifact``, and on CPython runtimes the outputs directory), never an earlier
cell's again, on every runtime with sessions."""

from __future__ import annotations

from codemode.activities.artifacts import ArtifactStore
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.worker.client.sessions import run_cell

FIRST = "save_artifact('first.txt', 'one')\n{cpython_write}'cell 1'"
SECOND = "{cpython_write}save_artifact('second.txt', 'two')\n'cell 2'"


async def test_each_cell_keeps_its_own_artifacts(client, task_queue, worker, store, runtime, session_name) -> None:
    cpython = runtime != "monty"

    def code(template: str, name: str) -> str:
        write = f"open(OUTPUTS_DIR + '/{name}', 'w').write('{name}')\n" if cpython else ""
        return template.format(cpython_write=write)

    first = await run_cell(client, session_name, code(FIRST, "a.txt"), runtime=runtime, task_queue=task_queue)
    second = await run_cell(client, session_name, code(SECOND, "b.txt"), runtime=runtime, task_queue=task_queue)
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
