"""Saved snippets at the MCP front (issue 48), through the official SDK's client over stdio: a
snippet is a tool of its own (its schema, its docstring) that runs it durably, it is found by
``search`` and described by ``get_schema``; saving one is a prompt the person picks, never a
tool the model could call."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters

from codemode.activities.snippets.library import SnippetLibrary
from codemode.activities.snippets.models import Provenance, SavedSnippet, Snippet, signature_hash
from codemode.runtimes.signatures import signature_from_callable
from codemode.storage import FileBlobStore
from tests.cli.runner import base_env
from examples import tools as example_tools
from tests.cli.runner import REPO
from tests.integrations.mcp_server.clients import McpSession, Person
from tests.integrations.mcp_server.conftest import CLIENT_INFO

CODE = "# How warm a city is, in Fahrenheit.\nw = get_weather(city)\nround(w['temp_c'] * 9 / 5 + 32)"


def saved_snippet() -> SavedSnippet:
    snippet = Snippet(
        name="fahrenheit",
        description="How warm a city is, in Fahrenheit.",
        code=CODE,
        parameters={
            "type": "object",
            "properties": {"city": {"type": "string", "description": "A city we know the weather of."}},
            "required": ["city"],
            "additionalProperties": False,
        },
        tools={"get_weather": signature_hash(signature_from_callable(example_tools.get_weather, name="get_weather"))},
    )
    provenance = Provenance(source_execution="exec-earlier", promoted_by="ana", promoted_at=datetime.now(UTC))
    return SavedSnippet(version=snippet.version(), snippet=snippet, provenance=provenance)


@pytest.fixture(scope="module")
def snippet_env(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A ``codemode mcp`` of its own: its own task queue and object store (its snippets are its)."""
    return base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"mcp-snip-{uuid.uuid4().hex[:8]}",
        CODEMODE_DATA_DIR=str(tmp_path_factory.mktemp("snippet-data")),
        CODEMODE_USER="ana",
    )


@pytest.fixture(scope="module")
async def session(snippet_env: dict[str, str]) -> AsyncIterator[Any]:
    library = SnippetLibrary(FileBlobStore(Path(snippet_env["CODEMODE_DATA_DIR"]) / "blobs"))
    await library.save(saved_snippet())
    # A small catalog (examples.tools): execute's description lists every stub, the snippets' too.
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "mcp", "--tools", "examples.tools", "--approval-wait", "3s"],
        env=snippet_env,
        cwd=str(REPO),
    )
    async with McpSession(server, elicitation_callback=Person(), client_info=CLIENT_INFO) as client:
        yield client


async def test_a_snippet_is_a_tool_of_its_own_and_runs(session: Any) -> None:
    saved = saved_snippet()
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"execute", "search", "get_schema", "result", "rollback", "snippet_fahrenheit"}
    assert "snippet_fahrenheit" not in {n for n in tools if n in ("execute", "search")}
    tool = tools["snippet_fahrenheit"]
    assert tool.input_schema == saved.snippet.parameters
    assert tool.description.startswith("How warm a city is, in Fahrenheit.") and saved.ref in tool.description

    ran = await session.call_tool("snippet_fahrenheit", {"city": "Tokyo"})
    assert not ran.is_error, ran.content
    assert ran.structured_content["status"] == "completed" and ran.structured_content["output"] == 75
    calls = ran.structured_content["tool_calls"]
    assert [c["tool"] for c in calls] == ["snippet:fahrenheit", "get_weather"]

    bad = await session.call_tool("snippet_fahrenheit", {"city": 3})
    assert bad.is_error


async def test_search_get_schema_and_execute_know_the_snippet(session: Any) -> None:
    found = await session.call_tool("search", {"query": "fahrenheit warm city", "limit": 3})
    assert found.structured_content["tools"][0]["name"] == "snippets.fahrenheit"
    stub = await session.call_tool("get_schema", {"tools": ["snippets.fahrenheit"]})
    assert "class SnippetsTools:" in stub.content[0].text and "def fahrenheit(self, city: str)" in stub.content[0].text
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert "snippets: SnippetsTools" in tools["execute"].description
    code = await session.call_tool("execute", {"code": "[snippets.fahrenheit(city='Paris'), 1]"})
    assert code.structured_content["output"] == [64, 1], code.content


async def test_saving_is_a_prompt_the_person_picks_never_a_tool(session: Any) -> None:
    tools = {t.name for t in (await session.list_tools()).tools}
    assert not any("save" in name or "promote" in name for name in tools)
    prompts = {p.name: p for p in (await session.list_prompts()).prompts}
    assert set(prompts) == {"save_snippet"}
    assert {a.name for a in prompts["save_snippet"].arguments} == {"execution_id", "name", "description"}

    ran = await session.call_tool("execute", {"code": "get_weather('London')['temp_c'] + 1"})
    execution_id = ran.structured_content["execution_id"]
    got = await session.get_prompt("save_snippet", {"execution_id": execution_id, "name": "london_plus_one"})
    text = got.messages[0].content.text
    assert text.startswith("Saved snippet london_plus_one@") and "promoted by ana" in text
    code = await session.call_tool("execute", {"code": "snippets.london_plus_one()"})
    assert code.structured_content["output"] == 15, code.content
    refused = await session.get_prompt("save_snippet", {"execution_id": "no-such-run", "name": "x"})
    assert refused.messages[0].content.text.startswith("Not saved:")
