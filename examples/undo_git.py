"""Undo, worked through (docs/guides/undo.md): a git commit made by the code, reverted by a
rollback. The CLI config's compensation for ``commit`` is ``revert``, with the commit's hash taken
from what ``git commit`` printed.

    python -m examples.undo_git      # with a server running, and git
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import uuid
from pathlib import Path

from codemode import CodeExecutionRequest, CodeModeWorker, connect, start_execution
from codemode.activities import ToolRegistry
from codemode.activities.cli_tools import CliTools
from codemode.client.undo import roll_back


def config(repo: Path) -> dict:
    return {
        "cliTools": {
            "git": {
                "allow": ["status", "commit", "revert"],
                "approval": "never",
                "cwd": str(repo),
                "flags": {"revert": {"no_edit": "bool"}},  # git's help spells it --[no-]edit
                "compensate": {
                    "commit": {
                        "tool": "revert",
                        "arguments": {"commit": "{result.stdout|re:([0-9a-f]+)\\]}", "no_edit": True},
                    }
                },
            }
        }
    }


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def a_repository() -> Path:
    repo = Path(tempfile.mkdtemp(prefix="undo-git-"))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Example")
    git(repo, "config", "user.email", "example@example.com")
    (repo / "app.py").write_text("print('hello')\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "first")
    (repo / "app.py").write_text("print('hello, world')\n")  # a change the code commits
    return repo


async def main() -> None:
    repo = a_repository()
    client = await connect()
    queue = f"undo-{uuid.uuid4().hex[:6]}"
    registry = ToolRegistry().include(CliTools(config(repo)).start().tool_specs())
    async with CodeModeWorker(client, registry, task_queue=queue).running():
        code = 'git.commit(all=True, message="greet the world")["stdout"].splitlines()[0]'
        outcome = await (await start_execution(client, CodeExecutionRequest(code=code), task_queue=queue)).result()
        print("committed:", outcome.output)
        undone = await roll_back(client, outcome.execution_id, by="ops", reason="not this one")
        print("rolled back:", [(e.tool, e.state) for e in undone.undo.entries])
    print("log:", git(repo, "log", "--format=%s").splitlines())
    print("app.py:", (repo / "app.py").read_text().strip())


if __name__ == "__main__":
    asyncio.run(main())
