"""Strands Agents' tests run in an environment of their own (``.venv-strands``, made by
``.ci/run``): Strands pins ``mcp<2``, our ``mcp`` extra needs ``mcp>=2.3``. In the main
environment (no Strands) they are skipped."""

from tests.workflows.conftest import events_file, task_queue  # noqa: F401 (the same fixtures)
