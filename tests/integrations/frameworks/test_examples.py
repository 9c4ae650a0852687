"""The framework guide's examples run as written (``docs/guides/agent-frameworks.md`` shows
them whole): each starts its agent workflow beside a worker with both plugins, its code's email
waits for a person, ``codemode approve`` (the command it prints) decides, and the agent answers
with the code's result. Offline: each framework's own test model, scripted."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from pathlib import Path

import pytest

from tests.cli.runner import REPO, codemode

GUIDE = (REPO / "docs" / "guides" / "agent-frameworks.md").read_text()
EXAMPLES = ["openai_agents", "langgraph", "deepagents", "adk"]


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES)
async def test_the_framework_example_runs(example: str, temporal_address: str, tmp_path) -> None:
    await run_example(example, temporal_address, tmp_path)


async def run_example(example: str, temporal_address: str, tmp_path: Path) -> None:
    """Run ``examples/frameworks/{example}.py``, approve what it waits for, check its answer."""
    assert f'--8<-- "examples/frameworks/{example}.py"' in GUIDE  # the guide shows the file this test runs
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_address,
        "CODEMODE_TASK_QUEUE": f"example-{uuid.uuid4().hex[:8]}",
        "PYTHONPATH": str(REPO),
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        f"examples.frameworks.{example}",
        env=env,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    printed: list[str] = []
    try:
        while not any(line.startswith("approve: ") for line in printed):
            line = await asyncio.wait_for(proc.stdout.readline(), 180)
            if not line:
                err = (await proc.stderr.read()).decode() if proc.stderr else ""
                raise AssertionError(f"exited before asking for approval:\n{''.join(printed)}\n{err}")
            printed.append(line.decode())
        assert any("waits for a person: send_email(to='ana@example.com'" in line for line in printed), printed
        command = re.search(r"approve: codemode (approve \S+ --all --by) NAME", printed[-1])
        assert command, printed
        decided = await codemode(*command.group(1).split(), "ana", env=env)
        assert decided.rc == 0, decided
        out, err = await asyncio.wait_for(proc.communicate(), 180)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    answer = "".join(printed) + out.decode()
    assert proc.returncode == 0, f"exited {proc.returncode}:\n{answer}\n{err.decode()}"
    assert re.search(r'done: .*"success": true.*"output": \{"temp_c": 18, "sent": true\}', answer), answer
