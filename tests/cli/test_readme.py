"""Every `codemode` command in the README parses against the real CLI (options exist,
arguments fit), and the set-up commands are the ones the other tests run."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from codemode.worker.cli import cli
from tests.cli.runner import REPO

README = (REPO / "README.md").read_text()


def bash_commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", README, flags=re.DOTALL)
    return [
        line.strip() for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")
    ]


def codemode_invocations() -> list[list[str]]:
    out = []
    for line in bash_commands():
        for part in line.split("&&"):
            words = shlex.split(part)
            if words and words[0] == "codemode":
                out.append(words[1:])
    return out


README_EXAMPLE = "pip install -e . && codemode run examples/trip.py --tools examples.tools"
README_TESTS = "bash .ci/run"


def test_the_two_setup_commands_are_in_the_readme() -> None:
    commands = bash_commands()
    assert commands[0] == README_EXAMPLE
    assert commands[1] == README_TESTS
    assert "python -m pytest -q" in (REPO / ".ci" / "run").read_text()


@pytest.mark.parametrize("args", codemode_invocations(), ids=lambda a: " ".join(a)[:60])
def test_readme_command_parses(args: list[str]) -> None:
    name, rest = args[0], args[1:]
    with click.Context(cli) as ctx:
        command = cli.get_command(ctx, name)
        assert command is not None, f"no command {name!r}"
        command.make_context(name, rest, parent=ctx)  # raises a UsageError on a bad option


def test_readme_examples_exist() -> None:
    for path in re.findall(r"\bexamples/\w+\.py\b", README):
        assert (REPO / path).is_file(), path
