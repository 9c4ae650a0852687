"""The approvals tests use the workflow tests' fixtures (task queue, events file, read_events)
with a worker of their own tools, and the inbox fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client

from codemode.activities import ToolRegistry
from codemode.worker.worker import CodeModeWorker
from tests.workflows.conftest import events_file, read_events, task_queue  # noqa: F401 (fixtures, and read_events for tests here)

from .inbox_fixtures import inbox  # noqa: F401 (the inbox fixture, for every test here)
from .inbox_pages import browser, pages  # noqa: F401 (the browser tests' server, inbox and chromium)

TOOLS_MODULE = "tests.approvals.team_tools"


@pytest.fixture
async def worker(client: Client, task_queue: str) -> AsyncIterator[CodeModeWorker]:  # noqa: F811 (task_queue is the fixture)
    w = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue)
    async with w.running():
        yield w
