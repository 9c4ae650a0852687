"""Fixtures for session tests: the workflow tests' worker and task queue, a session name per
test, and the runtimes sessions support (e2b on the local E2B server)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2b_local import LocalE2BServer
from tests.workflows.conftest import events_file, task_queue, worker  # noqa: F401 (shared fixtures)

_E2B: LocalE2BServer | None = None


def _local_e2b() -> LocalE2BServer:
    global _E2B
    if _E2B is None:
        _E2B = LocalE2BServer().start()
    return _E2B


@pytest.fixture(scope="session", autouse=True)
def _stop_local_e2b() -> Iterator[None]:
    yield
    global _E2B
    if _E2B is not None:
        _E2B.stop()
        _E2B = None


@pytest.fixture
def session_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture(params=["monty", "python", "e2b"])
def runtime(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each runtime with sessions; for e2b the SDK's variables point at the local server
    (for this process and the worker processes a test spawns)."""
    if request.param == "e2b":
        for key, value in _local_e2b().env.items():
            monkeypatch.setenv(key, value)
    return request.param


async def e2b_sandboxes() -> list[Any]:
    from e2b_code_interpreter import E2B

    server = _local_e2b()
    client = E2B(api_key="local-test-key", api_url=server.url, sandbox_url=server.url)
    return await client.AsyncSandbox.list().next_items()


async def no_e2b_sandbox_left() -> None:
    """The session's sandbox is killed when it closes."""
    if _E2B is None:
        return
    for _ in range(50):
        left = await e2b_sandboxes()
        if not left:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"sandboxes left running: {[(s.sandbox_id, s.state) for s in left]}")
