"""A git commit made by the code, reverted by its compensation (issue 47): ``compensate`` in the
CLI config names ``revert``, with the commit's hash taken from what ``git commit`` printed. Real
git on a temporary repository, a real worker and dev server."""

from __future__ import annotations

import asyncio
from pathlib import Path

from codemode.activities.cli_tools import CliTools
from codemode.client.executions import start_execution
from codemode.client.undo import roll_back
from codemode.workflows.models import CodeExecutionRequest

from .conftest import cli_worker, git, git_config

COMMIT = """
done = git.commit(all=True, message="say hello to the world")
done["stdout"].splitlines()[0]
"""


def undoable_git(repo: Path) -> dict:
    return git_config(
        repo,
        allow=["log", "status", "add", "commit", "revert"],
        approval={"commit": "never", "revert": "never", "*": "never"},
        flags={"revert": {"no_edit": "bool"}},  # git's help spells it --[no-]edit
        compensate={
            "commit": {"tool": "revert", "arguments": {"commit": "{result.stdout|re:([0-9a-f]+)\\]}", "no_edit": True}}
        },
    )


def test_the_config_says_commit_can_be_undone(repo: Path) -> None:
    specs = {s.code_name: s for s in CliTools(undoable_git(repo)).start().tool_specs()}
    commit = specs["git.commit"]
    assert commit.compensation is not None and commit.compensation.label == "git.revert"
    assert commit.undo_spec() is not None and commit.undo_spec().activity == "compensate:cli:git/commit"
    assert any("can be undone: git.revert" in n for n in commit.policy_notes)
    assert specs["git.log"].compensation is None


async def test_a_commit_is_reverted_by_a_rollback(client, repo: Path) -> None:
    before = git(repo, "rev-parse", "HEAD").strip()
    async with cli_worker(client, undoable_git(repo)) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=COMMIT), task_queue=worker.task_queue)
        outcome = await asyncio.wait_for(handle.result(), 60)
        assert outcome.success, outcome.error
        assert "say hello to the world" in outcome.output
        assert (repo / "src" / "app.py").read_text() == "print('hello, world')\n"
        (entry,) = outcome.undo.entries
        assert entry.tool == "cli:git/commit" and entry.state == "applied"
        committed = git(repo, "rev-parse", "HEAD").strip()
        assert committed != before

        rolled = await asyncio.wait_for(roll_back(client, handle.id, by="ops", reason="not yet"), 60)
    assert rolled.success, rolled.error
    (done,) = rolled.undo.entries
    assert done.state == "compensated"
    log = git(repo, "log", "--format=%s", "-3").splitlines()
    assert log[0] == 'Revert "say hello to the world"'
    assert log[1] == "say hello to the world"
    assert (repo / "src" / "app.py").read_text() == "print('hello')\n"
    assert git(repo, "show", "--format=%b", "-s", "HEAD").strip().endswith(f"{committed}.")
