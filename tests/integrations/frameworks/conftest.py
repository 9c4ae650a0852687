from tests.workflows.conftest import events_file, task_queue  # noqa: F401 (the same fixtures)
