"""`codemode tools`: what an LLM is shown."""

from __future__ import annotations

from tests.cli.runner import base_env, codemode


async def test_tools_prints_policies_stubs_and_prompt() -> None:
    res = await codemode("tools", "--tools", "examples.tools", env=base_env())
    assert res.rc == 0, res
    assert "# 4 tools from examples.tools (runtime: monty)" in res.out
    assert "send_email               requires approval" in res.out
    assert "flaky_exchange_rate      max_attempts=5, timeout=10s" in res.out
    assert "def get_weather(city: str) -> dict:" in res.out
    assert "async def get_forecast(city: str, days: int = 3) -> list[dict]:" in res.out
    assert "Write Python code to accomplish the task." in res.out


async def test_tools_accepts_a_path_and_rejects_an_unknown_module() -> None:
    res = await codemode("tools", "--tools", "examples/tools.py", env=base_env())
    assert res.rc == 0 and "def send_email(" in res.out, res
    res = await codemode("tools", "--tools", "examples.nope", env=base_env())
    assert res.rc == 2, res
    assert "cannot import tools module 'examples.nope'" in res.err
    res = await codemode("tools", env=base_env())
    assert res.rc == 2 and "missing --tools MODULE" in res.err, res
