"""`codemode run`, `result`, `status`, `history` against a real dev server and a `codemode worker`."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.runner import Background, Result, codemode

pytestmark = pytest.mark.usefixtures("cli_worker")

TRIP_OUTPUT = {"best": "Tokyo", "temp_c": 24, "usd_per_eur": 1.08}


@pytest.fixture(scope="module")
async def trip(cli_env: dict[str, str], cli_worker: Background) -> Result:
    """examples/trip.py run once with --json (it takes ~3 s: the flaky tool's retries back off)."""
    return await codemode("run", "examples/trip.py", "--tools", "examples.tools", "--json", env=cli_env)


async def test_run_json_prints_the_outcome(trip: Result) -> None:
    assert trip.rc == 0, trip
    outcome = json.loads(trip.out)  # exactly one JSON object on stdout
    assert outcome["success"] is True
    assert outcome["output"] == TRIP_OUTPUT
    assert "best city: Tokyo at 24C" in outcome["stdout"]
    flaky = [c for c in outcome["tool_calls"] if c["tool"] == "flaky_exchange_rate"]
    assert [c["attempts"] for c in flaky] == [3]
    # each tool call was shown on stderr as it happened
    assert "→ get_forecast(city='Tokyo', days=2)  ✓" in trip.err
    assert "→ get_weather(city='Atlantis')  ✗ ValueError: unknown city: Atlantis" in trip.err
    assert "→ flaky_exchange_rate(base='EUR', quote='USD')  ✓ 1.08  (3 attempts)" in trip.err


async def test_history_shows_attempts_from_the_workflow_history(trip: Result, cli_env: dict[str, str]) -> None:
    execution_id = json.loads(trip.out)["execution_id"]
    human = await codemode("history", execution_id, env=cli_env)
    assert human.rc == 0, human
    assert "flaky_exchange_rate(base='EUR', quote='USD')  ✓ 1.08  (3 attempts)" in human.out
    assert "retried after ConnectionError: upstream timeout (attempt 2)" in human.out
    assert "✗ ValueError: unknown city: Atlantis" in human.out
    assert "execution completed: success" in human.out

    audit = json.loads((await codemode("history", execution_id, "--json", env=cli_env)).out)
    assert audit["status"] == "completed" and audit["success"] is True
    assert audit["output"] == TRIP_OUTPUT
    calls = {c["summary"]: c for c in audit["calls"]}
    flaky = calls["flaky_exchange_rate(base='EUR', quote='USD')"]
    assert flaky["attempts"] == 3 and flaky["result"] == 1.08 and flaky["status"] == "ok"
    assert calls["get_weather(city='Atlantis')"]["error"]["type"] == "ValueError"
    assert len(audit["calls"]) == 5
    # Monty steps run as local activities, or inside the activity of the call before them.
    assert audit["steps"] and all(s["local"] or s["after"] for s in audit["steps"])


async def test_status_json_and_human(trip: Result, cli_env: dict[str, str]) -> None:
    execution_id = json.loads(trip.out)["execution_id"]
    res = await codemode("status", execution_id, "--json", env=cli_env)
    assert res.rc == 0, res
    status = json.loads(res.out)
    assert status["state"] == "completed"
    assert status["pending_approvals"] == []
    assert len(status["tool_calls"]) == 5
    human = await codemode("status", execution_id, env=cli_env)
    assert human.rc == 0 and f"{execution_id}: completed (monty)" in human.out, human


async def test_run_human_output_from_stdin_with_inputs(cli_env: dict[str, str]) -> None:
    code = 'print("looking up", city)\nget_weather(city)["temp_c"]\n'
    res = await codemode("run", "-", "--input", 'city="Tokyo"', env=cli_env, stdin=code)
    assert res.rc == 0, res
    assert "looking up Tokyo" in res.out
    assert res.out.strip().endswith("24")
    assert "→ get_weather(city='Tokyo')  ✓" in res.err
    assert "✓ completed in" in res.err


async def test_code_error_exits_1(cli_env: dict[str, str]) -> None:
    res = await codemode("run", "-", env=cli_env, stdin="x = 1\nx / 0\n")
    assert res.rc == 1, res
    assert "ZeroDivisionError" in res.err
    res = await codemode("run", "-", "--json", env=cli_env, stdin="x = 1\nx / 0\n")
    assert res.rc == 1, res
    outcome = json.loads(res.out)
    assert outcome["success"] is False and outcome["error"]["type"] == "ZeroDivisionError"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["examples/trip.py", "--input", "city=Paris"], "is not JSON"),
        (["examples/trip.py", "--input", "not a name=1"], "expected NAME=JSON"),
        (["examples/no_such_file.py"], "no such file"),
        (["examples/trip.py", "--tools", "no_such_tools_module"], "cannot import tools module 'no_such_tools_module'"),
        (["examples/trip.py", "--runtime", "cobol"], "Invalid value for '--runtime'"),
    ],
)
async def test_usage_and_input_errors_exit_2(cli_env: dict[str, str], args: list[str], message: str) -> None:
    res = await codemode("run", *args, env=cli_env)
    assert res.rc == 2, res
    assert message in res.err


async def test_no_wait_then_result(cli_env: dict[str, str]) -> None:
    execution_id = f"cli-nowait-{uuid.uuid4().hex[:6]}"
    res = await codemode(
        "run", "-", "--no-wait", "--id", execution_id, env=cli_env, stdin='get_weather("Paris")["sky"]'
    )
    assert res.rc == 0, res
    assert res.out.strip() == execution_id
    again = await codemode("run", "-", "--no-wait", "--id", execution_id, env=cli_env, stdin="1")
    assert again.rc == 2 and "already exists" in again.err, again
    got = await codemode("result", execution_id, "--json", env=cli_env)
    assert got.rc == 0, got
    assert json.loads(got.out)["output"] == "cloudy"
    human = await codemode("result", execution_id, env=cli_env)
    assert human.rc == 0 and '"cloudy"' in human.out, human


async def test_unknown_execution_exits_2(cli_env: dict[str, str]) -> None:
    for command in ("result", "status", "history"):
        res = await codemode(command, "no-such-execution", env=cli_env)
        assert res.rc == 2, res
        assert "no execution 'no-such-execution'" in res.err
