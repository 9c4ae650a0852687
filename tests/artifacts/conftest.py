from tests.workflows.conftest import events_file, task_queue, worker  # noqa: F401 (fixtures)
from tests.workflows.test_s3_workers import s3_bucket_store, s3_client  # noqa: F401 (fixtures)
