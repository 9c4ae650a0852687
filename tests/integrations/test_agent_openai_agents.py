"""The OpenAI Agents SDK guide's example runs as written (docs/guides/frameworks.md shows
``examples/agent_openai_agents.py`` as it is): the SDK's own ``MCPServerStdio`` starts
``codemode mcp``, the SDK's scripted test model calls ``execute`` twice in one session, and the
approval the SDK's client cannot put to a person (it has no elicitation) waits for
``codemode approve``, after which ``codemode result`` gives the outcome."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys

from codemode.activities import ToolRegistry
from codemode.worker.worker import CodeModeWorker
from tests.cli.runner import REPO, codemode

#: The example's session, as it prints it.
SESSION_ID = r"openai-agents-[0-9a-f]{8}"
GUIDE = (REPO / "docs" / "guides" / "frameworks.md").read_text()


async def test_the_openai_agents_example_runs(client, temporal_address, task_queue, tmp_path) -> None:
    assert '--8<-- "examples/agent_openai_agents.py"' in GUIDE  # the guide shows the file this test runs
    env = {
        **os.environ,
        "TEMPORAL_ADDRESS": temporal_address,
        "CODEMODE_TASK_QUEUE": task_queue,
        "PYTHONPATH": str(REPO),
        "OPENAI_AGENTS_DISABLE_TRACING": "1",
    }
    env.pop("CODEMODE_AGENT_MODEL", None)
    async with CodeModeWorker(client, ToolRegistry.from_module("examples.tools"), task_queue=task_queue).running():
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "examples.agent_openai_agents",
            env=env,
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out_b, err_b = await asyncio.wait_for(proc.communicate(), 240)
        out, err = out_b.decode(), err_b.decode()
        assert proc.returncode == 0, f"exited {proc.returncode}:\n{out}\n{err}"
        assert "Tokyo is warmest at 25C; 1000 EUR is 1080 USD." in out, out + err
        # No elicitation in the SDK's client: the run parks and execute says how to decide it.
        waiting = re.search(r"The email waits for a person \((session:openai-agents-\w+:2)\):", out)
        assert waiting, out + err
        execution_id = waiting.group(1)
        assert "send_email(to='ana@example.com'" in out
        # The guide's sample output is what the example prints (session ids aside, and the
        # test server's address, which the commands name when it is not the default one).
        sample = GUIDE.split("```\n> Which", 1)[1].split("```", 1)[0]
        printed = re.sub(rf" --address {re.escape(temporal_address)}", "", out)
        assert re.sub(SESSION_ID, "ID", "> Which" + sample).strip() == re.sub(SESSION_ID, "ID", printed).strip()
        approve = re.search(rf"approve: (codemode approve {re.escape(execution_id)} \S+)", out)
        assert approve, out
        decided = await codemode(*approve.group(1).split()[1:], "--by", "ana", env=env)
        assert decided.rc == 0, decided
        result = await codemode("result", execution_id, "--json", env=env)
    assert result.rc == 0, result
    outcome = json.loads(result.out)
    assert outcome["success"] and outcome["output"] is True, outcome
