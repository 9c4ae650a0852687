"""One MCP-calling program on every runtime: the same calls, the same outcome. Namespaces are
a host object Monty routes method calls of back to the host, and a namespace object in the
CPython runner's preamble (python and e2b, and any runtime built on the runner)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.workflows.test_e2b_runtime import e2b_env, e2b_server  # noqa: F401 - fixtures

from .conftest import mcp_worker
from .servers import reference_server

CODE = """
import json
total = everything.get_sum(a=1, b=2)
echo = everything.echo          # a namespace's function, read before it is called
said = echo(message="hi")
weather = everything.get_structured_content(location="Chicago")
try:
    everything.get_sum(a=1, b=json.loads('"x"'))
    bad = None
except ValueError as e:
    bad = str(e)
[total, said, sorted(weather), bad, type(everything).__name__]
"""

EXPECTED = [
    "The sum of 1 and 2 is 3.",
    "Echo: hi",
    ["conditions", "humidity", "temperature"],
    "everything.get_sum(): argument 'b': 'x' is not of type 'number'",
    "EverythingTools",
]


@pytest.fixture(scope="module")
async def worker(client) -> AsyncIterator[CodeModeWorker]:
    servers = {
        "everything": reference_server("everything", tools={"include": ["get-sum", "echo", "get-structured-content"]})
    }
    async with mcp_worker(client, servers) as w:
        yield w


@pytest.mark.parametrize("runtime", ["monty", "python", "e2b"])
async def test_same_outcome_on_every_runtime(client, worker, runtime: str, request) -> None:
    if runtime == "e2b":
        request.getfixturevalue("e2b_env")  # the local E2B-compatible server, for the real SDK
    req = CodeExecutionRequest(code=CODE, runtime=runtime)
    handle = await start_execution(client, req, task_queue=worker.task_queue)
    outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == EXPECTED
    assert [c.tool for c in outcome.tool_calls] == [
        "mcp:everything/get-sum",
        "mcp:everything/echo",
        "mcp:everything/get-structured-content",
        "mcp:everything/get-sum",
    ]
    assert [c.status for c in outcome.tool_calls] == ["ok", "ok", "ok", "error"]
