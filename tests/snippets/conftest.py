from __future__ import annotations

from tests.workflows.conftest import events_file, read_events, task_queue  # noqa: F401

TOOLS_MODULE = "tests.snippets.snippet_tools"
