"""The CLI of sessions, as a user runs it: ``codemode run FILE --session NAME`` cell after
cell, ``codemode session list|show|export|close``; the exported notebook validates with
nbformat and holds every cell with its code, output, result or error and tool calls."""

from __future__ import annotations

import os

import nbformat

from tests.cli.runner import base_env, codemode


async def test_cells_from_the_cli_and_the_notebook_export(temporal_address, task_queue, worker, session_name, tmp_path):
    env = base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=task_queue,
        CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"],
    )
    cells = {
        "load.py": "data = [slow_step(1, 0), 2]\nprint('loaded', len(data))\nlen(data)\n",
        "sum.py": "total = sum(data)\ntotal\n",
        "fail.py": "half = total / 2\nraise ValueError('nope')\n",
    }
    for name, code in cells.items():
        (tmp_path / name).write_text(code)

    async def run(*args: str):
        return await codemode("run", *args, env=env)

    first = await run(str(tmp_path / "load.py"), "--session", session_name)
    assert first.rc == 0, first
    assert f"Cell 1 of session {session_name} (session:{session_name}:1)." in first.err
    assert "loaded 2" in first.out and first.out.rstrip().endswith("2")
    second = await run(str(tmp_path / "sum.py"), "--session", session_name)
    assert second.rc == 0 and second.out.strip() == "12", second
    third = await run(str(tmp_path / "fail.py"), "--session", session_name)
    assert third.rc == 1 and "ValueError" in third.err, third

    wrong = await run(str(tmp_path / "sum.py"), "--session", session_name, "--runtime", "python")
    assert wrong.rc == 2 and f"session '{session_name}' runs on monty; this cell asks for python" in wrong.err, wrong
    bad = await run(str(tmp_path / "sum.py"), "--session", "no/slashes")
    assert bad.rc == 2 and "invalid session name 'no/slashes'" in bad.err, bad

    listed = await codemode("session", "list", "--open", env=env)
    assert listed.rc == 0 and f"{session_name}\topen" in listed.out, listed
    shown = await codemode("session", "show", session_name, env=env)
    assert shown.rc == 0, shown
    for text in (
        f"session {session_name}: open (monty), 3 cells",
        "✓ cell 1",
        "✗ cell 3",
        "ValueError: nope",
        "data: list",
        "total: int",
        "half: float",  # assigned before the error: kept
        "kept as: its state in the object store",
    ):
        assert text in shown.out, shown

    path = tmp_path / "session.ipynb"
    exported = await codemode("session", "export", session_name, "--ipynb", str(path), env=env)
    assert exported.rc == 0 and "(3 cells)" in exported.err, exported
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    assert [c.source for c in nb.cells] == list(cells.values())
    load, total, fail = nb.cells
    assert [o.output_type for o in load.outputs] == ["stream", "execute_result"]
    assert load.outputs[0].text == "loaded 2\n" and load.outputs[1].data["text/plain"] == "2"
    (call,) = load.metadata["codemode"]["tool_calls"]
    assert (call["tool"], call["args"], call["status"], call["result"]) == ("slow_step", [1, 0], "ok", 10)
    assert total.outputs[0].data["text/plain"] == "12" and total.metadata["codemode"]["tool_calls"] == []
    assert fail.outputs[-1].output_type == "error" and fail.outputs[-1].ename == "ValueError"
    assert fail.metadata["codemode"]["execution_id"] == f"session:{session_name}:3"

    closed = await codemode("session", "close", session_name, env=env)
    assert closed.rc == 0 and "closed after 3 cells" in closed.err, closed
    refused = await run(str(tmp_path / "sum.py"), "--session", session_name)
    assert refused.rc == 2 and f"session '{session_name}' is closed" in refused.err, refused
