"""One CLI-calling program on monty, python and pyodide: the same calls, the same outcome.
A binary's commands are a namespace like an MCP server's tools: a host object Monty routes
method calls of back to the host, a namespace object in the CPython runner (python, and
pyodide's WebAssembly CPython, which has no subprocesses of its own: the command runs on the
worker, and the code only sees its result)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .conftest import cli_worker, make_repo

CODE = """
import json
status = git.status(short=True)["stdout"]
count = len(git.log(oneline=True)["stdout"].splitlines())
rows = sqlite3.run(filename=":memory:", sql="select 2 * 21 as answer, 'x' as tag", json=True)
picked = jq.run(".items[] | select(.n > 1) | .name", input='{"items": [{"n": 1, "name": "a"}, {"n": 2, "name": "b"}]}')
try:
    git.log(max_count=json.loads('"five"'))  # a wrong type the checker cannot see
    bad = None
except (TypeError, ValueError) as e:
    bad = type(e).__name__
[status, count, rows, picked, bad, type(git).__name__]
"""


@pytest.fixture(scope="module")
async def worker(client, tmp_path_factory) -> AsyncIterator[CodeModeWorker]:
    repo = make_repo(Path(tmp_path_factory.mktemp("runtimes")) / "repo")
    config = {
        "cliTools": {
            "git": {"allow": ["log", "status"], "cwd": str(repo)},
            "sqlite3": {"args": ["-safe", "-readonly"], "approval": "never", "json": True},
            "jq": {"json": "stream"},
        }
    }
    async with cli_worker(client, config) as w:
        yield w


@pytest.mark.parametrize("runtime", ["monty", "python", "pyodide"])
async def test_same_outcome_on_every_runtime(client, worker, runtime: str) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code=CODE, runtime=runtime), task_queue=worker.task_queue
    )
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    status, count, rows, picked, bad, cls = outcome.output
    assert status == " M src/app.py\n" and count == 2
    assert rows == [{"answer": 42, "tag": "x"}]
    assert picked == ["b"]
    assert bad == "ValueError" and cls == "GitTools"
    assert [c.tool for c in outcome.tool_calls] == [
        "cli:git/status",
        "cli:git/log",
        "cli:sqlite3",
        "cli:jq",
        "cli:git/log",
    ]
    assert [c.status for c in outcome.tool_calls] == ["ok", "ok", "ok", "ok", "error"]
    assert outcome.tool_calls[-1].error.message == "git.log(): max_count takes a whole number, not 'five'"


async def test_monty_type_checks_calls_against_the_stubs(client, worker) -> None:
    code = "git.log(max_count='five')"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert not outcome.success and outcome.error.type == "TypeError"
    assert "Argument to bound method `GitTools.log` is incorrect" in outcome.error.message
    assert outcome.tool_calls == []  # nothing ran
