"""Our help parser against the help texts of the binaries installed here (git, sqlite3, jq),
on the points where cli-to-py's ``parse_help_text`` goes wrong: optional positionals, ``--``,
single-dash long options, optional values, two-value options."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from codemode.activities.cli_tools.arguments import ArgumentError, Arguments
from codemode.activities.cli_tools.config import FlagSpec
from codemode.activities.cli_tools.help_parse import Positional, parse_help, positionals_of


def help_of(argv: list[str], cwd: Path) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, check=False)
    return done.stdout or done.stderr


def test_git(repo: Path) -> None:
    log = parse_help(help_of(["git", "log", "-h"], repo), "git")
    assert log.positionals == [
        Positional(name="revision_range"),
        Positional(name="path", variadic=True, after_dashdash=True),
    ]
    decorate = next(f for f in log.flags if f.name == "decorate")
    assert decorate.optional_value and decorate.inline  # --decorate[=...]
    status = parse_help(help_of(["git", "status", "-h"], repo), "git")
    flags = {f.name: f for f in status.flags}
    assert flags["short"].spelling == "--short" and flags["short"].arity == 0
    assert flags["untracked_files"].optional_value and flags["find_renames"].value_type == "int"
    assert status.positionals == [Positional(name="pathspec", variadic=True, after_dashdash=True)]
    commit = parse_help(help_of(["git", "commit", "-h"], repo), "git")
    assert commit.positionals == []  # its usage spans lines; the option values are not positionals
    assert {"message", "amend", "reedit_message", "reuse_message"} <= {f.name for f in commit.flags}


def test_sqlite3_single_dash_long_options(tmp_path: Path) -> None:
    parsed = parse_help(help_of(["sqlite3", "-help"], tmp_path), "sqlite3")
    flags = {f.name: f for f in parsed.flags}
    assert flags["json"].spelling == "-json" and flags["json"].arity == 0
    assert flags["cmd"].spelling == "-cmd" and flags["cmd"].arity == 1
    assert {"header", "noheader", "readonly", "safe"} <= set(flags)  # -[no]header: two flags
    assert parsed.positionals == [Positional(name="filename", required=True), Positional(name="sql")]
    # A value in an argument of its own (-separator SEP) may not start with '-': were the help
    # misread (a switch taken for one with a value), it would be an option.
    args = Arguments.build("sqlite3.run", parsed, flags={}, positionals=None, inline_values=False, stdin=False)
    assert args.argv({"filename": "x.db", "separator": ";"})[0] == ["-separator", ";", "x.db"]
    with pytest.raises(ArgumentError, match=r"separator='-cmd' would be an argument of its own after -separator"):
        args.argv({"filename": "x.db", "separator": "-cmd"})


def test_jq_two_value_options(tmp_path: Path) -> None:
    parsed = parse_help(help_of(["jq", "-h"], tmp_path), "jq")
    flags = {f.name: f for f in parsed.flags}
    assert flags["arg"].arity == 2 and flags["c"].spelling == "-c"
    assert parsed.positionals == [Positional(name="jq_filter", required=True), Positional(name="file", variadic=True)]


def test_usage_lines() -> None:
    assert positionals_of("git diff [<options>] [<commit>] [--] [<path>...]") == [
        Positional(name="commit"),
        Positional(name="path", variadic=True, after_dashdash=True),
    ]
    assert positionals_of("tool [-o <file>] [--level=<n>] <input> [<more>...]") == [
        Positional(name="input", required=True),
        Positional(name="more", variadic=True),
    ]


def test_argv_rendering(repo: Path) -> None:
    parsed = parse_help(help_of(["git", "log", "-h"], repo), "git")
    args = Arguments.build(
        "git.log",
        parsed,
        flags={
            "max_count": FlagSpec(type="int"),
            "oneline": FlagSpec(type="bool"),
            "grep": FlagSpec(type="list[str]"),
            "quiet": None,
        },
        positionals=None,
        inline_values=True,
        stdin=False,
    )
    argv, stdin = args.argv(
        {
            "revision_range": "HEAD~2..HEAD",
            "path": ["src", "-odd name"],
            "max_count": 3,
            "oneline": True,
            "grep": ["a b", "c"],
            "decorate": True,
            "decorate_refs": "refs/heads/*",
        }
    )
    assert (
        argv
        == [
            "--max-count=3",
            "--oneline",
            "--grep=a b",
            "--grep=c",
            "--decorate",
            "--decorate-refs=refs/heads/*",
            "HEAD~2..HEAD",
            "--",
            "src",
            "-odd name",
        ]
        and stdin is None
    )
    assert "quiet" not in args.flags  # the host removed it
