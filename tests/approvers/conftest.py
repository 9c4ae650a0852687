from __future__ import annotations

from tests.workflows.conftest import TOOLS_MODULE, events_file, read_events, task_queue  # noqa: F401
