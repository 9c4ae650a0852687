"""`codemode list`: executions from the server's visibility index, filtered by state and runtime."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any

import pytest

from tests.cli.runner import codemode
from tests.cli.test_approvals import park_email

pytestmark = pytest.mark.usefixtures("cli_worker")


async def listed(env: dict[str, str], *args: str, until: Any = None) -> list[dict[str, Any]]:
    """``codemode list --json ARGS``; the index is updated asynchronously, so ask again (for a
    while) until ``until(executions)`` holds."""
    for _ in range(100):
        res = await codemode("list", "--json", *args, env=env)
        assert res.rc == 0, res
        executions = json.loads(res.out)["executions"]
        if until is None or until(executions):
            return executions
        await asyncio.sleep(0.2)
    raise AssertionError(f"codemode list {' '.join(args)} never matched: {executions}")


def ids(executions: list[dict[str, Any]]) -> list[str]:
    return [e["execution_id"] for e in executions]


async def test_list_finds_a_parked_run_by_state_and_runtime(cli_env: dict[str, str]) -> None:
    execution_id, call_id = await park_email(cli_env)
    parked = await listed(cli_env, "--status", "awaiting_approval", until=lambda es: execution_id in ids(es))
    row = next(e for e in parked if e["execution_id"] == execution_id)
    assert row["state"] == "awaiting_approval" and row["runtime"] == "monty"
    assert "send_email" in row["summary"] or "get_weather" in row["summary"], row
    assert all(e["state"] == "awaiting_approval" for e in parked)
    assert execution_id in ids(await listed(cli_env, "--status", "awaiting_approval", "--runtime", "monty"))
    assert execution_id not in ids(await listed(cli_env, "--status", "awaiting_approval", "--runtime", "python"))
    assert execution_id not in ids(await listed(cli_env, "--status", "completed"))

    human = await codemode("list", "--status", "awaiting_approval", env=cli_env)
    assert human.rc == 0, human
    header, *lines = human.out.splitlines()
    assert header.split() == ["ID", "STATE", "RUNTIME", "STARTED", "SUMMARY"]
    line = next(ln for ln in lines if ln.startswith(execution_id))
    assert line.split()[1:3] == ["awaiting_approval", "monty"]

    assert (await codemode("approve", execution_id, call_id, env=cli_env)).rc == 0
    assert (await codemode("result", execution_id, env=cli_env)).rc == 0
    done = await listed(cli_env, "--status", "completed", until=lambda es: execution_id in ids(es))
    assert next(e for e in done if e["execution_id"] == execution_id)["closed_at"] is not None
    await listed(cli_env, "--status", "awaiting_approval", until=lambda es: execution_id not in ids(es))


async def test_list_shows_a_code_error_as_failed(cli_env: dict[str, str]) -> None:
    res = await codemode("run", "-", "--json", env=cli_env, stdin="1 / 0")
    assert res.rc == 1, res
    execution_id = json.loads(res.out)["execution_id"]
    failed = await listed(cli_env, "--status", "failed", until=lambda es: execution_id in ids(es))
    assert next(e for e in failed if e["execution_id"] == execution_id)["state"] == "failed"


async def test_list_is_newest_first_and_limited(cli_env: dict[str, str]) -> None:
    started = []
    for n in range(3):
        res = await codemode("run", "-", "--json", env=cli_env, stdin=str(n))
        assert res.rc == 0, res
        started.append(json.loads(res.out)["execution_id"])
    ours = set(started)
    everything = await listed(cli_env, "--limit", "100", until=lambda es: ours <= set(ids(es)))
    assert [i for i in ids(everything) if i in ours] == started[::-1]
    starts = [datetime.fromisoformat(e["started_at"]) for e in everything]
    assert starts == sorted(starts, reverse=True)
    assert {e["state"] for e in everything if e["execution_id"] in ours} == {"completed"}
    assert len(await listed(cli_env, "--limit", "1")) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "parked"], "Invalid value for '--status'"),
        (["--runtime", "cobol"], "Invalid value for '--runtime'"),
        (["--limit", "0"], "Invalid value for '--limit'"),
    ],
)
async def test_list_usage_errors_exit_2(cli_env: dict[str, str], args: list[str], message: str) -> None:
    res = await codemode("list", *args, env=cli_env)
    assert res.rc == 2 and message in res.err, res
