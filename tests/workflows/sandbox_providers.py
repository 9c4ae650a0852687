"""The sandbox providers a worker serves, for tests that run on each: docker (podman), e2b,
blaxel and modal (their local servers, driven by the unmodified SDKs), and one sandbox sweep
as the Schedule runs it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client

from codemode.activities.sandbox_sweep import SandboxSweepInput, SandboxSweepReport
from codemode.runtimes import get_runtime
from codemode.runtimes.runner.owner import EXECUTION_LABEL
from codemode.workflows.sweep_workflow import SANDBOX_SWEEP_WORKFLOW
from tests.blaxel_local import LocalBlaxelServer
from tests.e2b_local import LocalE2BServer
from tests.modal_local import LocalModalServer

PROVIDERS = ["docker", "e2b", "blaxel", "modal"]


@dataclass
class Provider:
    name: str
    runtime: Any

    async def sandboxes(self) -> dict[str, str]:
        """Every sandbox of ours the provider holds: its name and its execution."""
        return {
            self.runtime.sandbox_of(own.handle): own.labels.get(EXECUTION_LABEL, "")
            for own in await self.runtime.list_own()
            if own.usable or self.name == "docker"  # a container in any state is still held
        }

    async def labels(self, sandbox: str) -> dict[str, str]:
        return next(o.labels for o in await self.runtime.list_own() if self.runtime.sandbox_of(o.handle) == sandbox)

    async def of(self, execution_id: str) -> list[str]:
        return [name for name, owner in (await self.sandboxes()).items() if owner == execution_id]

    async def wait_for(self, execution_id: str, count: int, timeout: float = 60.0) -> list[str]:
        for _ in range(int(timeout / 0.1)):
            found = await self.of(execution_id)
            if len(found) >= count:
                return found
            await asyncio.sleep(0.1)
        raise AssertionError(f"{self.name}: never {count} sandboxes of {execution_id}: {await self.sandboxes()}")


@pytest.fixture(name="provider_server", scope="module", params=PROVIDERS)
def provider_server_fixture(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    name = request.param
    if name == "docker":
        yield name, None
        return
    kind = {"e2b": LocalE2BServer, "blaxel": LocalBlaxelServer, "modal": LocalModalServer}[name]
    with kind() as running:
        yield name, running


@pytest.fixture(name="provider")
async def provider_fixture(
    provider_server: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Provider]:
    """The provider's variables for this process and the workers it spawns; afterwards it
    holds no sandbox."""
    name, server = provider_server
    if name == "docker":
        from tests.docker_engine import engine

        engine()
    else:
        for key, value in server.env.items():
            monkeypatch.setenv(key, value)
        if name == "blaxel":
            monkeypatch.setenv("BL_REGION", "local")
    runtime = get_runtime(name)
    found = Provider(name, runtime)
    try:
        yield found
        for _ in range(50):
            left = await found.sandboxes()
            if not left:
                break
            await asyncio.sleep(0.1)
        assert not left, f"{name} sandboxes left: {left}"
    finally:
        await runtime.aclose()


async def sweep(client: Client, task_queue: str) -> SandboxSweepReport:
    """One sweep, as the Schedule runs it (a workflow on the task queue, shown in the UI)."""
    return await client.execute_workflow(
        SANDBOX_SWEEP_WORKFLOW,
        SandboxSweepInput(young_seconds=0),
        id=f"sandbox-sweep-{uuid.uuid4().hex[:8]}",
        task_queue=task_queue,
        result_type=SandboxSweepReport,
    )
