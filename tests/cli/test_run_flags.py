"""`codemode run` reaches every request field: limits, allowed tools, approval timeout, code approval."""

from __future__ import annotations

import getpass
import json
import uuid
from datetime import timedelta

import pytest

from codemode.worker.connection import connect
from codemode.workflows.models import CodeExecutionRequest
from tests.cli.runner import codemode

pytestmark = pytest.mark.usefixtures("cli_worker")


async def start_request(temporal_address: str, execution_id: str) -> CodeExecutionRequest:
    """The request the workflow was started with, decoded from its history's first event."""
    client = await connect(temporal_address)
    history = await client.get_workflow_handle(execution_id).fetch_history()
    attrs = history.events[0].workflow_execution_started_event_attributes
    [request] = await client.data_converter.decode(attrs.input.payloads, [CodeExecutionRequest])
    return request


async def test_every_flag_lands_in_the_request(temporal_address: str, cli_env: dict[str, str]) -> None:
    execution_id = f"cli-flags-{uuid.uuid4().hex[:6]}"
    res = await codemode(
        "run", "-", "--no-wait", "--id", execution_id,
        "--timeout", "90s", "--memory", "64M", "--max-calls", "7",
        "--approval-timeout", "2h", "--require-code-approval",
        "--max-stdout", "64K", "--allow-tool", "get_weather", "--allow-tool", "get_forecast",
        env=cli_env, stdin="1 + 1",
    )  # fmt: skip
    assert res.rc == 0, res
    request = await start_request(temporal_address, execution_id)
    assert request.limits.timeout_seconds == 90
    assert request.limits.max_memory_bytes == 64 * 1024 * 1024
    assert request.limits.max_tool_calls == 7
    assert request.approval_timeout == timedelta(hours=2)
    assert request.require_code_approval is True
    assert request.limits.max_stdout_bytes == 64 * 1024
    assert request.tools == ["get_weather", "get_forecast"]

    # the code itself waits for approval (call id "code"), as the status shows
    status = json.loads((await codemode("status", execution_id, "--json", env=cli_env)).out)
    assert status["state"] == "awaiting_approval"
    assert [p["call_id"] for p in status["pending_approvals"]] == ["code"]
    assert (await codemode("approve", execution_id, "code", env=cli_env)).rc == 0
    done = await codemode("result", execution_id, "--json", env=cli_env)
    assert done.rc == 0 and json.loads(done.out)["output"] == 2, done


async def test_defaults_stay_the_models(temporal_address: str, cli_env: dict[str, str]) -> None:
    execution_id = f"cli-defaults-{uuid.uuid4().hex[:6]}"
    res = await codemode("run", "-", "--no-wait", "--id", execution_id, env=cli_env, stdin="1")
    assert res.rc == 0, res
    request = await start_request(temporal_address, execution_id)
    # Who started it is recorded (four-eyes rules read it): CODEMODE_USER, else the OS user.
    assert request.started_by == (cli_env.get("CODEMODE_USER") or getpass.getuser())
    assert request.model_copy(update={"started_by": None}) == CodeExecutionRequest(code="1")
    assert (await codemode("result", execution_id, env=cli_env)).rc == 0


@pytest.mark.parametrize(
    ("flag", "value", "expected"),
    [("--timeout", "1.5", 1.5), ("--timeout", "1h30m", 5400.0), ("--memory", "1G", 2**30), ("--memory", "16M", 2**24)],
)
async def test_values_with_units(
    temporal_address: str, cli_env: dict[str, str], flag: str, value: str, expected: float
) -> None:
    execution_id = f"cli-units-{uuid.uuid4().hex[:6]}"
    res = await codemode("run", "-", "--no-wait", "--id", execution_id, flag, value, env=cli_env, stdin="1")
    assert res.rc == 0, res
    limits = (await start_request(temporal_address, execution_id)).limits
    assert (limits.timeout_seconds if flag == "--timeout" else limits.max_memory_bytes) == expected
    assert (await codemode("result", execution_id, env=cli_env)).rc == 0


@pytest.mark.parametrize(
    ("args", "code", "error"),
    [
        (["--max-calls", "1"], 'get_weather("Paris")\nget_weather("London")\n', "too many tool calls: the limit is 1"),
        (["--memory", "512K"], "x = list(range(200000))\nlen(x)", "MemoryError: memory limit exceeded"),
        (["--allow-tool", "get_forecast"], 'get_weather("Paris")', "Name `get_weather` used when not defined"),
    ],
)
async def test_limits_reach_the_sandbox(cli_env: dict[str, str], args: list[str], code: str, error: str) -> None:
    res = await codemode("run", "-", *args, env=cli_env, stdin=code)
    assert res.rc == 1, res
    assert error in res.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "12X"], "Invalid value for '--memory': '12X' is not a size"),
        (["--memory", "0"], "the size must be more than 0 bytes"),
        (["--timeout", "soon"], "Invalid value for '--timeout': 'soon' is not a duration"),
        (["--timeout", "-5"], "the duration must be more than 0"),
        (["--approval-timeout", "5y"], "Invalid value for '--approval-timeout': '5y' is not a duration"),
        (["--approval-timeout", "0s"], "the duration must be more than 0"),
        (["--max-calls", "-1"], "Invalid value for '--max-calls'"),
        (["--max-calls", "many"], "'many' is not a valid whole number"),
        (["--max-stdout", "lots"], "Invalid value for '--max-stdout': 'lots' is not a size"),
        (["--tools", "examples.tools", "--allow-tool", "nope"], "--allow-tool: nope not in examples.tools"),
    ],
)
async def test_bad_values_exit_2(cli_env: dict[str, str], args: list[str], message: str) -> None:
    res = await codemode("run", "examples/trip.py", *args, env=cli_env)
    assert res.rc == 2, res
    assert message in res.err
