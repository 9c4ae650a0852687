"""``codemode mcp`` against the session's real dev server: each module's server gets a task
queue of its own and runs its worker in-process (nothing else polls that queue)."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from mcp_types import Implementation
from temporalio.client import Client

from codemode.worker.dev_server import free_port
from tests.cli.runner import Background, base_env
from tests.integrations.mcp_server.clients import TOOLS, McpSession, Person, stdio_server

CLIENT_NAME = "pytest-client"
CLIENT_INFO = Implementation(name=CLIENT_NAME, version="1.0")
#: The HTTP server's token, given to ``ana`` (decisions made with it are ``mcp:ana``).
SECRET = secrets.token_hex(16)


@pytest.fixture(scope="module")
def mcp_env(temporal_address: str, data_dir: Path) -> dict[str, str]:
    """The environment of a ``codemode mcp`` process: the session's server and object store
    (so the tests read its payloads), a task queue of the module's own."""
    return base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"mcp-{uuid.uuid4().hex[:8]}",
        CODEMODE_DATA_DIR=str(data_dir),
    )


@pytest.fixture(scope="module")
def person() -> Person:
    return Person()


@pytest.fixture
def reset_person(person: Person) -> Person:
    """The module's person, back to approving at once."""
    person.answer, person.comment, person.delay, person.on_ask = "approve", "", 0.0, None
    person.arguments = person.result = ""
    person.asked.clear()
    return person


@pytest.fixture
def count_runs(client: Client, mcp_env: dict[str, str]) -> Callable[[], object]:
    """How many executions the module's task queue has seen (to show a refusal started none)."""

    async def count() -> int:
        return (await client.count_workflows(f'TaskQueue="{mcp_env["CODEMODE_TASK_QUEUE"]}"')).count

    return count


@pytest.fixture(scope="module")
async def modern(mcp_env: dict[str, str], person: Person) -> AsyncIterator[object]:
    """A client on the newest protocol era (2026-07-28: questions ride InputRequiredResult)."""
    async with McpSession(
        stdio_server(mcp_env, "--approval-wait", "3s"), elicitation_callback=person, client_info=CLIENT_INFO
    ) as session:
        yield session


@pytest.fixture(scope="module")
async def legacy(mcp_env: dict[str, str], person: Person, modern: object) -> AsyncIterator[object]:
    """A client on the handshake era (2025-11-25: the server asks mid-call and waits), on the
    same task queue (the first server's worker serves it); its calls follow a run 6 s at most."""
    async with McpSession(
        stdio_server(mcp_env, "--approval-wait", "3s", "--max-wait", "6s"),
        mode="legacy",
        elicitation_callback=person,
        client_info=CLIENT_INFO,
    ) as session:
        yield session


@pytest.fixture(scope="module")
async def http_server(mcp_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    """``codemode mcp --transport http`` on a free port with ana's token; yields its URL."""
    port = free_port()
    env = {**mcp_env, "CODEMODE_MCP_TOKEN": f"ana:{SECRET}"}
    log = Path(tmp_path_factory.mktemp("mcp-http")) / "server.log"
    server = await Background(
        "mcp", "--tools", TOOLS, "--transport", "http", "--port", str(port), env=env, log=log
    ).start("codemode MCP server ready on", timeout=60)
    yield f"http://127.0.0.1:{port}/mcp"
    assert await server.stop() == 0, server.output()
