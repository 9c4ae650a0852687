"""CLI tests: ``codemode`` subprocesses against the session's real dev server, with one
``codemode worker`` subprocess per module on a task queue of its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.cli.runner import Background, base_env


@pytest.fixture(scope="module")
def cli_env(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"cli-{uuid.uuid4().hex[:8]}",
        CODEMODE_DATA_DIR=str(tmp_path_factory.mktemp("codemode-data")),
    )


@pytest.fixture(scope="module")
async def cli_worker(cli_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Background]:
    log = Path(tmp_path_factory.mktemp("worker")) / "worker.log"
    worker = await Background("worker", "--tools", "examples.tools", env=cli_env, log=log).start("Worker ready")
    yield worker
    assert await worker.stop() == 0, worker.output()
