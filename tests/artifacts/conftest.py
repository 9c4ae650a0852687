from tests.workflows.conftest import events_file, task_queue, worker  # noqa: F401 (fixtures)
