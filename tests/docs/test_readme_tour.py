"""The README is a tour that links into the documentation site: every link it makes into the
repository resolves, it stays short, and the pydantic-ai section it shows (run as written by
tests/integrations/test_readme_agent.py) is the same on the guide's page."""

from __future__ import annotations

import re

from tests.cli.runner import REPO
from tests.cli.test_readme import PAGES, README, bash_commands

LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)#\s]+)(?:#[^)]*)?\)")


def test_readme_links_resolve() -> None:
    targets = LINK.findall(README)
    assert any(t.startswith("docs/") for t in targets)
    for target in targets:
        assert (REPO / target).exists(), target


def test_readme_is_a_tour() -> None:
    assert len(README.splitlines()) <= 260


def section(text: str) -> str:
    return text.split("`DurableCodeMode`", 1)[1].split("\n#", 1)[0]


def test_the_pydantic_ai_guide_shows_what_the_readme_runs() -> None:
    guide = PAGES["docs/guides/pydantic-ai.md"]
    readme = README.split("### pydantic-ai: `DurableCodeMode`", 1)[1].split("\n### ", 1)[0]
    commands = bash_commands(readme)
    assert len(commands) == 3 and all(c in bash_commands(guide) for c in commands)
    sample = readme.split("```\n> Which", 1)[1].split("```", 1)[0]
    assert sample in guide
