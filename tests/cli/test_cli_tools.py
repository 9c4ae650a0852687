"""`--cli-config` on the commands: `codemode tools` lists the commands with their ids,
policies and stubs, `codemode run` runs code that calls git (CODEMODE_CLI_CONFIG works as
the flag does), and a worker refuses to start when a binary is not there."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from tests.cli.runner import codemode
from tests.cli_tools.conftest import make_repo


@pytest.fixture(scope="module")
def cli_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = Path(tmp_path_factory.mktemp("cli-tools"))
    repo = make_repo(root / "repo")
    path = root / "cli.json"
    config = {"git": {"allow": ["log", "status", "diff", "commit"], "approval": {"commit": "always"}, "cwd": str(repo)}}
    path.write_text(json.dumps({"cliTools": config}))
    return path


async def test_tools_lists_commands_with_ids_policies_and_stubs(cli_env: dict[str, str], cli_config: Path) -> None:
    res = await codemode("tools", "--tools", "examples.tools", "--cli-config", str(cli_config), env=cli_env)
    assert res.rc == 0, res
    assert "# 8 tools from examples.tools and CLI tools git (runtime: monty)" in res.out
    assert (
        "#   git.log                  cli:git/log  no approval: read-only; retried up to 3 attempts; timeout=60s"
        in res.out
    )
    assert "#   git.commit               cli:git/commit  approval: always (configured); never run twice" in res.out
    prompt, _, stubs = res.out.partition("# The full stubs of the commands")
    # The prompt lists the namespace and its subcommands; the full signatures follow it.
    assert "    def log(self, *args: str, **flags: Any) -> dict[str, Any]:" in prompt
    assert 'get_schema("git.log") shows its exact parameters' in prompt
    assert "def log(self, revision_range: str | None = None, path: str | list[str] | None = None, *, " in stubs
    assert "max_count: int | None = None" in stubs and "oneline: bool = False" in stubs
    assert "usage: git log [<options>] [<revision-range>] [[--] <path>...]" in stubs  # the help as docstring


async def test_run_calls_git_from_code(cli_env: dict[str, str], cli_config: Path, tmp_path: Path) -> None:
    code = tmp_path / "code.py"
    code.write_text("r = git.log(max_count=1, format='%s')\nr['stdout'].strip()\n")
    env = {
        **cli_env,
        "CODEMODE_CLI_CONFIG": str(cli_config),
        "CODEMODE_TASK_QUEUE": f"cli-tools-{uuid.uuid4().hex[:6]}",
    }
    res = await codemode("run", str(code), "--json", env=env)
    assert res.rc == 0, res
    outcome = json.loads(res.out)
    assert outcome["output"] == "add the app"
    assert [c["tool"] for c in outcome["tool_calls"]] == ["cli:git/log"]
    assert "cli:git/log: git log --max-count=1 --format=%s" in res.err  # the call, as it happened


async def test_a_worker_does_not_start_without_its_binaries(cli_env: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "cli.json"
    config.write_text(json.dumps({"cliTools": {"kubectl-nope": {"allow": ["get"]}, "git": {"allow": ["log"]}}}))
    res = await codemode("worker", "--cli-config", str(config), env=cli_env)
    assert res.rc == 2, res
    assert f"--cli-config: {config}: kubectl-nope: the binary 'kubectl-nope' is not there or not executable" in res.err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cliTools": {"git": {"allow": ["log"], "approval": {"push": "always"}}}}))
    res = await codemode("tools", "--cli-config", str(bad), env=cli_env)
    assert res.rc == 2 and "approval names 'push', which is not in allow (log)" in res.err, res


async def test_the_readme_example_runs(cli_env: dict[str, str]) -> None:
    """`codemode run examples/repo_summary.py --cli-config examples/cli.json` in this checkout."""
    env = {**cli_env, "CODEMODE_TASK_QUEUE": f"cli-readme-{uuid.uuid4().hex[:6]}"}
    res = await codemode("run", "examples/repo_summary.py", "--cli-config", "examples/cli.json", "--json", env=env)
    assert res.rc == 0, res
    outcome = json.loads(res.out)
    assert len(outcome["output"]["recent"]) in range(1, 6) and outcome["output"]["probe"] == 0
    assert [c["tool"] for c in outcome["tool_calls"]] == ["cli:git/log", "cli:git/status", "cli:jq", "cli:git/log"]
