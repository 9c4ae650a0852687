"""Every `codemode` command in the README and the documentation site (docs/) parses against
the real CLI (options exist, arguments fit), every example they name exists, and the set-up
commands are the ones the other tests run."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from codemode.apps.cli import cli
from tests.cli.runner import REPO

README = (REPO / "README.md").read_text()
#: The README and every page of the documentation site.
PAGES = {"README.md": README} | {
    str(page.relative_to(REPO)): page.read_text() for page in sorted((REPO / "docs").rglob("*.md"))
}


def bash_commands(text: str = README) -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.DOTALL)
    return [
        line.strip() for block in blocks for line in block.splitlines() if line.strip() and not line.startswith("#")
    ]


def codemode_invocations() -> list[list[str]]:
    out = []
    for line in (line for text in PAGES.values() for line in bash_commands(text)):
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
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
    for name, text in PAGES.items():
        for path in re.findall(r"\b(?:examples|bench)/\w+\.(?:py|json)\b", text):
            assert (REPO / path).is_file(), f"{name} names {path}"


def test_the_docs_have_pages() -> None:
    assert "docs/get-started.md" in PAGES and len(PAGES) > 20
