from __future__ import annotations

import pytest

from tests.workflows.conftest import events_file, read_events, task_queue  # noqa: F401

TOOLS_MODULE = "tests.snippets.snippet_tools"


@pytest.fixture(autouse=True)
async def _no_snippet_left(store):
    """The session's object store is every test's: leave no saved snippet for the next one
    (an MCP front started later would offer it as a tool)."""
    yield
    await store.delete_prefix(bucket=store.bucket, prefix="codemode/ns/default/snippets/")
