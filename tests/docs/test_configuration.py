"""Every ``CODEMODE_*`` environment variable the installed code reads is on the configuration
page (docs/reference/configuration.md), and the page names none the code does not read."""

from __future__ import annotations

import re

from tests.cli.runner import REPO
from tests.test_import_layers import LAYERS as IMPORT_LAYERS

LAYERS = (*IMPORT_LAYERS, "codemode")
PAGE = (REPO / "docs" / "reference" / "configuration.md").read_text()
#: Read by what this repository ships besides the package: the compose file and the examples.
OUTSIDE = ("docker-compose.yml", "deploy", "examples")
NAME = re.compile(r"\bCODEMODE_[A-Z0-9_]*[A-Z0-9]\b")


def names_in(paths: tuple[str, ...], pattern: str) -> set[str]:
    found: set[str] = set()
    for top in paths:
        root = REPO / top
        for path in [root] if root.is_file() else root.rglob(pattern):
            if path.is_file():
                found |= set(NAME.findall(path.read_text(errors="replace")))
    return found


def test_every_variable_the_code_reads_is_documented() -> None:
    read = names_in(LAYERS, "*.py")
    assert "CODEMODE_ENCRYPTION_KEYS" in read and "CODEMODE_S3_BUCKET" in read
    missing = sorted(read - set(NAME.findall(PAGE)))
    assert not missing, f"not on docs/reference/configuration.md: {missing}"


def test_the_page_names_only_variables_something_reads() -> None:
    read = names_in(LAYERS, "*.py") | names_in(OUTSIDE, "*")
    stale = sorted(set(NAME.findall(PAGE)) - read)
    assert not stale, f"docs/reference/configuration.md names variables nothing reads: {stale}"
