"""Undo from the command line (issue 47), as a person types it: ``codemode deny ID CALL --rollback``
on a waiting call, and ``codemode rollback ID`` on a run that ended (a rollback run of its own,
``rollback:ID``), against a ``codemode worker`` subprocess whose tools can be undone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.runner import Background, approve_command, codemode

TOOLS = "tests.workflows.undo_tools"


@pytest.fixture(scope="module")
def undo_env(cli_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    here = tmp_path_factory.mktemp("undo-cli")
    return {
        **cli_env,
        "CODEMODE_TASK_QUEUE": cli_env["CODEMODE_TASK_QUEUE"] + "-undo",
        "CODEMODE_TEST_LEDGER": str(here / "ledger.jsonl"),
        "CODEMODE_TEST_EVENTS": str(here / "events.jsonl"),
    }


@pytest.fixture(scope="module")
async def undo_worker(undo_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Background]:
    log = Path(tmp_path_factory.mktemp("undo-worker")) / "worker.log"
    worker = await Background("worker", "--tools", TOOLS, env=undo_env, log=log).start("Worker ready")
    yield worker
    assert await worker.stop() == 0, worker.output()


def compensated(env: dict[str, str], execution_id: str) -> list[str]:
    """Whom each finished compensation of ``execution_id`` paid back, in the order they ran."""
    path = Path(env["CODEMODE_TEST_EVENTS"])
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e["to"] for e in events if e["event"] == "compensated" and e["key"].startswith(execution_id + "/")]


async def test_deny_with_rollback_compensates_newest_first(undo_env, undo_worker, tmp_path: Path) -> None:
    code = tmp_path / "pay.py"
    code.write_text("transfer('ann', 10)\ntransfer('bob', 20)\npayout('cy', 500)\n")
    parked = await codemode("run", str(code), "--tools", TOOLS, env=undo_env)
    assert parked.rc == 3, parked
    execution_id, call_id = approve_command(parked.err)

    denied = await codemode(
        "deny", execution_id, call_id, "--rollback", "--by", "ops", "--reason", "wrong batch", env=undo_env
    )
    assert denied.rc == 0, denied
    assert "the run rolls back" in denied.out, denied

    result = await codemode("result", execution_id, env=undo_env)
    assert result.rc == 1, result  # denied: the run failed, and says what it undid
    assert "undo: denied and rolled back by ops: wrong batch" in result.out + result.err, result
    assert compensated(undo_env, execution_id) == ["bob", "ann"]
    status = json.loads((await codemode("status", execution_id, "--json", env=undo_env)).out)
    assert [(e["call_id"], e["state"]) for e in status["undo"]["entries"]] == [
        ("1", "compensated"),
        ("2", "compensated"),
    ]


async def test_rollback_of_an_ended_run(undo_env, undo_worker, tmp_path: Path) -> None:
    code = tmp_path / "done.py"
    code.write_text("transfer('dee', 7)\nlookup('x')\n'done'\n")
    ran = await codemode("run", str(code), "--tools", TOOLS, "--json", env=undo_env)
    assert ran.rc == 0, ran
    execution_id = json.loads(ran.out)["execution_id"]

    undone = await codemode("rollback", execution_id, "--by", "ops", "--reason", "by mistake", env=undo_env)
    assert undone.rc == 0, undone
    assert "undo: rolled back by ops: by mistake" in undone.out, undone
    assert "call 1 transfer(to='dee', amount=7): compensated" in undone.out, undone
    assert f"rollback:{execution_id}" in undone.err, undone
    # Again, as JSON: nothing is compensated twice.
    again = await codemode("rollback", execution_id, "--json", env=undo_env)
    assert again.rc == 0, again
    assert [e["state"] for e in json.loads(again.out)["undo"]["entries"]] == ["compensated"]
    assert compensated(undo_env, execution_id) == ["dee"]

    unknown = await codemode("rollback", "exec-nobody-ran-this", env=undo_env)
    assert unknown.rc == 2 and "cannot be rolled back" in unknown.err, unknown


async def test_run_on_failure_compensate(undo_env, undo_worker, tmp_path: Path) -> None:
    code = tmp_path / "fails.py"
    code.write_text("transfer('eve', 1)\ntransfer('fay', 2)\n1 / 0\n")
    ran = await codemode("run", str(code), "--tools", TOOLS, "--on-failure", "compensate", "--json", env=undo_env)
    assert ran.rc == 1, ran
    outcome = json.loads(ran.out)
    assert outcome["error"]["type"] == "ZeroDivisionError"
    assert outcome["undo"]["rollback"]["trigger"] == "on_failure"
    assert compensated(undo_env, outcome["execution_id"]) == ["fay", "eve"]
    kept = await codemode("run", str(code), "--tools", TOOLS, "--json", env=undo_env)  # --on-failure keep
    assert kept.rc == 1 and [e["state"] for e in json.loads(kept.out)["undo"]["entries"]] == ["applied"] * 2, kept
