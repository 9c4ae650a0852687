"""sqlite3 and jq with their JSON output parsed, a command that runs past its timeout, a
command whose output passes the cap, the clean environment a command gets, and a binary that
is not there."""

from __future__ import annotations

import asyncio
import sqlite3 as sqlite
from pathlib import Path

import pytest

from codemode.activities.cli_tools import CliStartError, CliTools
from codemode.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest

from .conftest import cli_worker

QUERY = "select customer, count(*) as n, round(sum(total), 2) as spent from orders group by customer order by spent desc limit 3"
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "shop.db"
    with sqlite.connect(path) as db:
        db.execute("create table orders (id integer primary key, customer text, total real)")
        db.executemany(
            "insert into orders (customer, total) values (?, ?)",
            [(f"customer {i % 50}", round(i * 1.25, 2)) for i in range(1, 5001)],
        )
    return path


def sqlite_config(**extra: object) -> dict:
    entry = {"args": ["-safe", "-readonly"], "approval": "never", "json": True, "timeout": 2, **extra}
    return {"cliTools": {"sqlite3": entry, "jq": {"json": "stream", "max_output": "64K"}}}


async def test_json_output_is_parsed(client, database: Path) -> None:
    code = f"""
top = sqlite3.run(filename={str(database)!r}, sql={QUERY!r}, json=True)
names = jq.run("map(.customer)", input=json.dumps(top), compact_output=True)
try:
    sqlite3.run(filename={str(database)!r}, sql="delete from orders")
    wrote = "yes"
except RuntimeError as e:
    wrote = str(e)
[top, names, wrote]
"""
    async with cli_worker(client, sqlite_config()) as worker:
        handle = await start_execution(
            client, CodeExecutionRequest(code="import json\n" + code), task_queue=worker.task_queue
        )
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    top, names, wrote = outcome.output
    with sqlite.connect(database) as db:  # the same query through Python's own sqlite3
        db.row_factory = sqlite.Row
        expected = [dict(r) for r in db.execute(QUERY)]
    assert top == expected and len(top) == 3 and top[0]["n"] == 100
    assert names == [[r["customer"] for r in expected]]
    assert wrote.startswith("CalledProcessError: cli:sqlite3:") and "readonly" in wrote
    with sqlite.connect(database) as db:
        assert db.execute("select count(*) from orders").fetchone() == (5000,)


async def test_a_timeout_ends_the_call_with_a_clear_error(client) -> None:
    code = (
        f"try:\n    sqlite3.run(filename=':memory:', sql={ENDLESS!r})\nexcept TimeoutError as e:\n    out = str(e)\nout"
    )
    async with cli_worker(client, sqlite_config(timeout=1)) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    # Ended by the command's own timeout (not the activity's, 10 s later, nor a retry).
    assert outcome.output.startswith("cli:sqlite3: `sqlite3 -safe -readonly :memory: ")
    assert outcome.output.endswith("ran past its 1s timeout and was killed")
    (call,) = outcome.tool_calls
    assert call.error.type == "TimeoutError" and call.attempts == 1  # not run again


async def test_output_past_the_cap_is_cut_and_says_so(client) -> None:
    code = "r = jq.run('range(1000000)', null_input=True)\n[r['truncated'], len(r['stdout']), r['stdout'][-90:]]"
    async with cli_worker(client, {"cliTools": {"jq": {"max_output": "64K"}}}) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    truncated, size, tail = outcome.output
    assert truncated is True
    assert 64 * 1024 <= size < 64 * 1024 + 200  # the cap, and the note
    assert tail.endswith("[output cut at 64 KB: the command printed more and was stopped]")


async def test_a_command_gets_a_clean_environment(client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """printenv shows what a command sees: PATH, what ``env`` names, never the worker's."""
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "do-not-leak")
    monkeypatch.setenv("CODEMODE_TEST_PASSED", "passed on")
    config = {"printenv": {"approval": "never", "env": ["CODEMODE_TEST_PASSED"], "cwd": str(tmp_path)}}
    async with cli_worker(client, {"cliTools": config}) as worker:
        code = "printenv.run()['stdout']"
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success, outcome.error
    seen = dict(line.split("=", 1) for line in outcome.output.splitlines())
    assert set(seen) == {"PATH", "CODEMODE_TEST_PASSED"} and seen["CODEMODE_TEST_PASSED"] == "passed on"
    assert "do-not-leak" not in outcome.output


def test_a_missing_binary_fails_the_start(tmp_path: Path) -> None:
    config = {
        "cliTools": {
            "frobnicate-9f2c": {"allow": ["get"]},
            "mine": {"command": str(tmp_path / "bin" / "mine")},
            "git": {"allow": ["log"], "cwd": str(tmp_path / "nowhere")},
        }
    }
    with pytest.raises(CliStartError) as err:
        CliTools(config).start()
    message = str(err.value)
    assert "frobnicate-9f2c: the binary 'frobnicate-9f2c' is not there or not executable (PATH=" in message
    assert f"mine: the binary '{tmp_path / 'bin' / 'mine'}' is not there or not executable" in message
    assert f"git: its cwd '{tmp_path / 'nowhere'}' is not a directory" in message
