"""The code blocks of the documentation site (docs/) and the README are code: every Python
block compiles (top-level ``await`` allowed: the code a sandbox runs may await), every JSON
block parses, and a block marked ``<!-- test: run -->`` runs as written against a real server.
The `codemode` commands in bash blocks are checked against the CLI in tests/cli/test_readme.py;
examples shown whole (``--8<-- "examples/..."``) are run by their own tests."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import sys

import pytest

from tests.cli.runner import REPO
from tests.cli.test_readme import PAGES

#: A fenced block: (page, language, the line before it, body).
BLOCK = re.compile(r"(?:^|\n)(?P<before>[^\n]*)\n```(?P<lang>\w+)\n(?P<body>.*?)\n```", re.DOTALL)
RUN_MARK = "<!-- test: run -->"


def blocks(lang: str) -> list[tuple[str, str, str]]:
    """(page:line, the line before the fence, body) of each ``lang`` block."""
    out = []
    for name, text in PAGES.items():
        for m in BLOCK.finditer(text):
            if m.group("lang") == lang and not m.group("body").startswith("--8<--"):
                line = text.count("\n", 0, m.start("body"))
                out.append((f"{name}:{line}", m.group("before").strip(), m.group("body")))
    return out


def params(lang: str, *, marked: bool = False) -> list:
    return [pytest.param(w, b, id=w) for w, before, b in blocks(lang) if not marked or before == RUN_MARK]


@pytest.mark.parametrize("where, body", params("python"))
def test_python_blocks_compile(where: str, body: str) -> None:
    try:
        compile(body, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as err:
        pytest.fail(f"{where}: {err}")


@pytest.mark.parametrize("where, body", params("json"))
def test_json_blocks_parse(where: str, body: str) -> None:
    json.loads(body)


def test_the_runnable_blocks_are_marked() -> None:
    marked = [where for where, before, _ in blocks("python") if before == RUN_MARK]
    assert "docs/guides/python.md:6" in marked, marked


@pytest.mark.parametrize("where, body", params("python", marked=True))
async def test_marked_blocks_run(where: str, body: str, temporal_address: str, tmp_path) -> None:
    script = tmp_path / "block.py"
    script.write_text(body)
    env = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "PYTHONPATH": str(REPO)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, f"{where} exited {proc.returncode}:\n{out.decode()}\n{err.decode()}"
    assert out.decode().strip(), f"{where} printed nothing"
