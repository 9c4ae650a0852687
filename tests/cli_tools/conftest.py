"""CLI tools tests: real binaries nobody here wrote (git, sqlite3, jq; ``.ci/run`` installs
them), behind a real worker on the session's dev server, each worker on a task queue of its
own."""

from __future__ import annotations

import contextlib
import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from codemode.activities import ToolRegistry
from codemode.activities.cli_tools import CliTools
from codemode.worker.worker import CodeModeWorker


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` the way a person would (not through code mode)."""
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path) -> Path:
    """A repository with two commits and a change to one file left uncommitted."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Test Person")
    git(path, "config", "user.email", "person@example.com")
    (path / "notes.txt").write_text("first line\n")
    git(path, "add", "notes.txt")
    git(path, "commit", "-q", "-m", "add notes")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hello')\n")
    git(path, "add", "src")
    git(path, "commit", "-q", "-m", "add the app")
    (path / "src" / "app.py").write_text("print('hello, world')\n")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def git_config(repo: Path, **extra: Any) -> dict[str, Any]:
    """The issue's shape: git with an allow-list, commit approved by a person, a cwd."""
    entry = {
        "allow": ["log", "status", "diff", "show", "add", "commit"],
        "approval": {"commit": "always"},
        "cwd": str(repo),
    }
    return {"cliTools": {"git": {**entry, **extra}}}


@contextlib.asynccontextmanager
async def cli_worker(
    client: Client, config: dict[str, Any], *, tools_module: str | None = None, **worker_options: Any
) -> AsyncIterator[CodeModeWorker]:
    """A worker whose tools are the configured commands (and a module's), on a task queue of
    its own (``worker.task_queue``)."""
    registry = ToolRegistry.from_module(tools_module) if tools_module else ToolRegistry()
    registry.include(CliTools(config).start().tool_specs())
    worker = CodeModeWorker(client, registry, task_queue=f"cli-{uuid.uuid4().hex[:8]}", **worker_options)
    async with worker.running():
        yield worker


@pytest.fixture
def config_file(tmp_path: Path) -> Iterator[Any]:
    """Write a configuration to a file and return its path."""

    def write(config: dict[str, Any], name: str = "cli.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(config))
        return path

    yield write
