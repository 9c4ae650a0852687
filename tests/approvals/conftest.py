from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client

from codemode.activities import ToolRegistry
from codemode.worker.worker import CodeModeWorker

from .inbox_fixtures import inbox  # noqa: F401 (the inbox fixture, for every test here)

TOOLS_MODULE = "tests.approvals.team_tools"


@pytest.fixture
def task_queue() -> str:
    return f"tq-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def events_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "events.jsonl"
    path.touch()
    monkeypatch.setenv("CODEMODE_TEST_EVENTS", str(path))
    return path


def read_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[CodeModeWorker]:
    w = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue)
    async with w.running():
        yield w
