"""What people and programs read has every field (issue 44): the compact JSON that leaves
defaults out is the history's alone. ``run --json``, ``result --json``, ``status --json`` and
``history --json`` on code that ends in an uncaught ``KeyError`` all say the error's ``kind``
(its default, ``runtime``) and the other defaulted fields; so do the client library's models."""

from __future__ import annotations

import json

import pytest

from tests.cli.runner import Background, Result, codemode

pytestmark = pytest.mark.usefixtures("cli_worker")

KEY_ERROR = 'get_weather("Paris")\n{"a": 1}["b"]\n'


@pytest.fixture(scope="module")
async def failed(cli_env: dict[str, str], cli_worker: Background) -> Result:
    return await codemode("run", "-", "--json", env=cli_env, stdin=KEY_ERROR)


def assert_full_error(error: dict[str, object]) -> None:
    assert error["type"] == "KeyError"
    assert error["kind"] == "runtime" and "line" in error and "traceback" in error, error


async def test_run_and_result_json_have_the_full_outcome(failed: Result, cli_env: dict[str, str]) -> None:
    assert failed.rc == 1, failed
    outcome = json.loads(failed.out)
    assert_full_error(outcome["error"])
    assert {"runs", "stdout", "cell", "artifacts", "duration_ms"} <= set(outcome), outcome
    [call] = outcome["tool_calls"]
    assert call["kwargs"] == {} and call["approval"] is None and call["error"] is None, call
    again = await codemode("result", outcome["execution_id"], "--json", env=cli_env)
    assert again.rc == 1 and json.loads(again.out) == outcome, again


async def test_status_and_history_json_have_every_field(failed: Result, cli_env: dict[str, str]) -> None:
    execution_id = json.loads(failed.out)["execution_id"]
    status = json.loads((await codemode("status", execution_id, "--json", env=cli_env)).out)
    assert_full_error(status["error"])
    assert status["pending_approvals"] == [] and status["tool_calls"][0]["kwargs"] == {}, status
    audit = json.loads((await codemode("history", execution_id, "--json", env=cli_env)).out)
    assert_full_error(audit["error"])


def test_the_client_librarys_models_dump_in_full() -> None:
    from codemode.runtimes.types import compact_json
    from codemode.workflows.models import ErrorInfo, ExecutionOutcome

    outcome = ExecutionOutcome(execution_id="e", success=False, error=ErrorInfo(type="KeyError", message="'b'"))
    assert_full_error(json.loads(outcome.model_dump_json())["error"])
    assert_full_error(outcome.model_dump(mode="json")["error"])
    assert "kind" not in json.loads(compact_json(outcome))["error"]  # the history's form
