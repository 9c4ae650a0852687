"""The ``--cli-config`` file: the issue's JSON shape and TOML, policies and their defaults,
checked keys, names that collide, and the lazy reading of help texts."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.activities.cli_tools import CliConfigError, CliStartError, CliTools, help_text, load_cli_config
from examples import tools as example_tools

from .conftest import git_config


def test_the_issue_shape_and_its_policies(repo: Path) -> None:
    cli = CliTools(
        {
            "cliTools": {
                "git": {
                    "allow": ["log", "status", "diff", "commit"],
                    "approval": {"commit": "always"},
                    "cwd": str(repo),
                }
            }
        }
    ).start()
    specs = {s.name: s for s in cli.tool_specs()}
    assert list(specs) == ["cli:git/log", "cli:git/status", "cli:git/diff", "cli:git/commit"]
    log, commit = specs["cli:git/log"], specs["cli:git/commit"]
    assert (log.code_name, log.namespace) == ("git.log", "git")
    # Read-only defaults: no approval, retried; anything else: approval, never run twice.
    assert not log.options.requires_approval and log.settings.idempotent and log.options.max_attempts == 3
    assert commit.options.requires_approval and not commit.settings.idempotent
    assert commit.policy_notes == [
        "approval: always (configured)",
        "never run twice: retried only when it could not start",
    ]
    # The environment is an allow-list: PATH, git's own fixed variables, nothing of the worker's.
    assert set(log.settings.env) == {"PATH", "GIT_TERMINAL_PROMPT", "GIT_EDITOR", "GIT_PAGER", "GIT_OPTIONAL_LOCKS"}
    assert log.settings.cwd == str(repo) and log.settings.timeout == 60 and log.settings.max_output == 1024 * 1024


def test_toml_and_policy_keys(tmp_path: Path) -> None:
    path = tmp_path / "cli.toml"
    path.write_text(
        """
[cliTools.git]
allow = ["log", "push", "stash list"]
approval = { "*" = "never", push = "always" }
idempotent = { push = false }
timeout = { push = 120 }
max_output = "256K"
env = { GIT_SSH_COMMAND = "ssh -o BatchMode=yes", HOME = "${HOME:-/nonexistent}" }
"""
    )
    config = load_cli_config(path, environ={"HOME": "/home/ana"})
    specs = {s.code_name: s for s in CliTools(config).start().tool_specs()}
    assert list(specs) == ["git.log", "git.push", "git.stash_list"]
    assert specs["git.stash_list"].name == "cli:git/stash_list" and specs["git.stash_list"].settings.words == (
        "stash",
        "list",
    )
    assert not specs["git.stash_list"].options.requires_approval  # "*": never
    push = specs["git.push"]
    assert push.options.requires_approval and push.settings.timeout == 120 and push.settings.max_output == 256 * 1024
    assert push.settings.env["HOME"] == "/home/ana" and push.settings.env["GIT_SSH_COMMAND"] == "ssh -o BatchMode=yes"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"allow": ["log"], "approval": {"push": "always"}}, "approval names 'push', which is not in allow (log)"),
        ({"allow": ["log -c alias.x=!sh"]}, "is not a subcommand (words such as 'log' or 'stash list', no flags)"),
        ({"allow": ["log"], "aproval": "never"}, "aproval: Extra inputs are not permitted"),
        ({"allow": []}, 'lists no subcommand: leave "allow" out'),
        ({"allow": ["log"], "approval": "sometimes"}, "approval"),
        ({"allow": ["log"], "cwd": "${NO_SUCH_VARIABLE_29}"}, "git.cwd names ${NO_SUCH_VARIABLE_29}, which is not set"),
        ({"allow": ["log"], "flags": {"log": {"max_count": {"flag": "-c x"}}}}, "is not a flag"),
        ({"allow": ["log"], "timeout": 0}, "must be more than 0"),
    ],
)
def test_a_bad_configuration_says_what_is_wrong(entry: dict, message: str) -> None:
    with pytest.raises(CliConfigError, match="tool 'git'") as err:
        load_cli_config({"cliTools": {"git": entry}})
    assert message in str(err.value)


def test_a_file_that_is_not_one(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("{nope")
    with pytest.raises(CliConfigError, match="not JSON"):
        load_cli_config(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"mcpServers": {}}')
    with pytest.raises(CliConfigError, match='expected an object with "cliTools"'):
        load_cli_config(tmp_path / "other.json")


def test_collisions_fail_loudly(repo: Path) -> None:
    # A binary's namespace named like a tool of a module.
    clash = CliTools({"cliTools": {"get_weather": {"command": "git", "allow": ["log"], "cwd": str(repo)}}}).start()
    with pytest.raises(
        ValueError, match=r"tool 'cli:get_weather/log' \(get_weather\.log from CLI tool 'get_weather'\) collides"
    ):
        ToolRegistry.from_module(example_tools).include(clash.tool_specs())
    # Two binaries in one namespace; two subcommands with one Python name.
    with pytest.raises(CliStartError, match="git and vcs both use the namespace 'git'"):
        CliTools(
            {"cliTools": {"git": {"allow": ["log"]}, "vcs": {"command": "git", "namespace": "git", "allow": ["log"]}}}
        ).start()
    with pytest.raises(CliStartError, match="'rev-parse' and 'rev_parse' would both be git.rev_parse in the code"):
        CliTools({"cliTools": {"git": {"allow": ["rev-parse", "rev_parse"]}}}).start()
    with pytest.raises(CliStartError, match="its namespace 'list' would hide Python's own"):
        CliTools({"cliTools": {"list": {"command": "git", "allow": ["log"]}}}).start()


def test_help_is_read_lazily_once_and_cached(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "help-cache"
    config = git_config(repo)
    cli = CliTools(config, cache_dir=cache).start()
    registry = ToolRegistry().include(cli.tool_specs())
    listed = registry.signatures(listed=True)  # what a prompt shows: no help read
    assert "def log(self, *args: str, **flags: Any)" in registry["cli:git/log"].listed_signature.stub(method=True)
    assert set(listed) == set(registry.names) and not any(s.loaded for s in cli.tool_specs())
    assert not cache.exists()
    log = registry["cli:git/log"].signature  # the first need: `git log -h`, parsed, cached
    names = [p.name for p in log.parameters]
    assert names[:2] == ["revision_range", "path"] and {"max_count", "oneline", "format", "decorate"} <= set(names)
    assert [s.loaded for s in cli.tool_specs()] == [True, False, False, False, False, False]
    assert len(list(cache.glob("*.json"))) == 1
    # Another worker process: from the file, without running git.
    monkeypatch.setattr(help_text, "_memory", {})
    monkeypatch.setattr(help_text, "run_for_help_sync", _no_help)
    again = CliTools(config, cache_dir=cache).start().tool_specs()[0]
    assert again.signature == log


def _no_help(*args: object, **kwargs: object) -> None:
    raise AssertionError("the help was read again")


def test_approval_when_conditions_on_a_command(repo: Path) -> None:
    """``approval_when`` per subcommand: a forced push waits for a person, a plain one does not."""
    cli = CliTools(
        {
            "cliTools": {
                "git": {
                    "allow": ["push", "log"],
                    "approval_when": {"push": [{"argument": "force", "op": "==", "value": True}]},
                    "cwd": str(repo),
                }
            }
        }
    ).start()
    specs = {s.name: s for s in cli.tool_specs()}
    push, log = specs["cli:git/push"], specs["cli:git/log"]
    assert not push.options.requires_approval and push.approval_rules is not None
    assert push.needs_approval({"force": True})[0] and not push.needs_approval({"force": False})[0]
    assert push.policy_notes[0] == "approval when force == True (configured)"
    assert log.approval_rules is None and not log.options.requires_approval
