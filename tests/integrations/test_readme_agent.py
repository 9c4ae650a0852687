"""The README's "Use it from an agent" section runs as written: its three commands, against a
real server and a worker of ``examples.tools``, in a fresh process each."""

from __future__ import annotations

import asyncio
import os
import re
import sys

from codemode.activities import ToolRegistry
from codemode.worker.worker import CodeModeWorker
from tests.cli.runner import REPO, codemode

#: A cell of the conversation's session, as the example prints it.
CELL_ID = r"session:run_code-[\w-]+:\d+"
SECTION = (REPO / "README.md").read_text().split("### pydantic-ai: `DurableCodeMode`", 1)[1].split("\n### ", 1)[0]


def section_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", SECTION, flags=re.DOTALL)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


async def python_m(args: list[str], env: dict[str, str], cwd: os.PathLike[str]) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *args, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{out.decode()}\n{err.decode()}"
    return out.decode()


async def test_the_agent_section_runs_as_written(client, temporal_address, task_queue, tmp_path) -> None:
    run, approve, resume = section_commands()
    assert run == "python -m examples.agent_pydantic_ai"
    assert re.fullmatch(rf"codemode approve {CELL_ID} --all --by ana", approve)
    assert resume == "python -m examples.agent_pydantic_ai --resume agent-conversation.json"
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_address,
        "CODEMODE_TASK_QUEUE": task_queue,
        "PYTHONPATH": str(REPO),
    }

    async with CodeModeWorker(client, ToolRegistry.from_module("examples.tools"), task_queue=task_queue).running():
        first = await python_m(run.split()[1:], env, tmp_path)
        assert "Tokyo is warmest at 25C; 1000 EUR is 1080 USD." in first
        execution_id = re.search(rf"⏸ ({CELL_ID}) waits for a person: send_email\(", first).group(1)  # type: ignore[union-attr]
        assert execution_id.endswith(":2")  # the conversation's second call: the same session as the first
        assert f"approve: codemode approve {execution_id} --all --by NAME" in first
        # The README's sample output is what the example prints (ids aside).
        sample = SECTION.split("```\n> Which", 1)[1].split("```", 1)[0]
        assert re.sub(CELL_ID, "ID", "> Which" + sample).strip() == re.sub(CELL_ID, "ID", first).strip()

        decided = await codemode(*re.sub(CELL_ID, execution_id, approve).split()[1:], env=env)
        assert decided.rc == 0, decided
        final = await python_m(resume.split()[1:], env, tmp_path)
    assert final.strip() == "Sent."
