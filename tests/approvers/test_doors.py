"""The doors that are not the CLI sign too (issue 37): the MCP front's elicitation and the
pydantic-ai deferred path decide through a key configured for the person at that client, and
without one they say what to set up instead of sending a decision that would be ignored."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from codemode.activities import ToolRegistry
from codemode.approvals import keys
from codemode.client.signing import SigningKeyMissing
from codemode.integrations.pydantic_ai import DurableCodeMode
from codemode.worker.worker import CodeModeWorker
from tests.cli.runner import base_env
from tests.integrations.agent_model import all_tool_returns
from tests.integrations.mcp_server.clients import McpSession, Person, stdio_server

from .conftest import TOOLS_MODULE

EMAIL = "send_email(to='ana@example.com', subject='Hi', body='Hello')['sent']"


@pytest.fixture(scope="module")
def config_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("config"))


@pytest.fixture(scope="module")
def ana_key(config_home: Path) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CONFIG_HOME", str(config_home))
        _, public = keys.generate("ana")
    return public


@pytest.fixture(scope="module")
def approvers(tmp_path_factory: pytest.TempPathFactory, ana_key: str) -> Path:
    path = Path(tmp_path_factory.mktemp("approvers")) / "approvers.toml"
    path.write_text(f'[people.ana]\nkeys = ["{ana_key}"]\n\n[defaults]\napprovers = ["ana"]\n')
    return path


def mcp_env(temporal_address: str, data_dir: Path, approvers: Path, config_home: Path, **extra: str) -> dict:
    return base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"mcp-signed-{uuid.uuid4().hex[:8]}",
        CODEMODE_DATA_DIR=str(data_dir),
        CODEMODE_APPROVERS=str(approvers),
        XDG_CONFIG_HOME=str(config_home),
        **extra,
    )


@pytest.fixture(scope="module")
async def signing_client(temporal_address, data_dir, approvers, config_home) -> AsyncIterator[tuple[object, Person]]:
    """An MCP client whose person is ana, with her key configured for the server."""
    person = Person()
    env = mcp_env(temporal_address, data_dir, approvers, config_home, CODEMODE_APPROVER="ana")
    async with McpSession(stdio_server(env, "--approval-wait", "10s"), elicitation_callback=person) as session:
        yield session, person


async def test_mcp_elicitation_signs_with_the_configured_key(signing_client, ana_key) -> None:
    session, person = signing_client
    res = await session.call_tool("execute", {"code": EMAIL})
    report = res.structured_content
    assert report["status"] == "completed", res
    assert len(person.asked) == 1
    approval = report["tool_calls"][0]["approval"]
    assert approval["by"] == "ana" and approval["signatures"][0]["key"] == ana_key


async def test_mcp_without_a_key_says_what_to_set_up(temporal_address, data_dir, approvers, config_home) -> None:
    person = Person()
    env = mcp_env(temporal_address, data_dir, approvers, config_home)
    async with McpSession(stdio_server(env, "--approval-wait", "10s"), elicitation_callback=person) as session:
        res = await session.call_tool("execute", {"code": EMAIL, "wait_seconds": 20})
    report = res.structured_content
    assert report["status"] == "awaiting_approval", res
    assert person.asked == []  # not asked: an unsigned answer would only be ignored
    assert "CODEMODE_APPROVER=NAME" in report["note"]
    assert "Not asked here" in res.content[0].text


async def test_pydantic_ai_deferred_decision_is_signed(client, task_queue, approvers, config_home, monkeypatch) -> None:
    def fn(messages, info):
        returns = all_tool_returns(messages)
        if not returns:
            return ModelResponse(
                parts=[ToolCallPart("run_code", {"code": "transfer('bob', 5)['to']"}, tool_call_id="a")]
            )
        return ModelResponse(parts=[TextPart(json.dumps({r.tool_call_id: r.content for r in returns}))])

    worker = CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue, approvers=approvers)
    async with worker.running():
        capability = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue, session=False)
        agent = Agent(FunctionModel(fn), capabilities=[capability], output_type=[str, DeferredToolRequests])
        first = await agent.run("pay bob")
        requests = first.output
        assert isinstance(requests, DeferredToolRequests)
        meta = requests.metadata["a"]
        execution_id, call_id = meta["execution_id"], meta["pending_approvals"][0]["call_id"]
        monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home / "nobody"))  # no key for ana here
        with pytest.raises(SigningKeyMissing, match="CODEMODE_APPROVER=NAME"):
            await capability.decide(execution_id, call_id, approve=True, by="ana")
        monkeypatch.setenv("CODEMODE_APPROVER", "ana")
        monkeypatch.setenv("CODEMODE_APPROVER_KEY", str(config_home / "codemode" / "approvers" / "ana.key"))
        record = await capability.decide(execution_id, call_id, approve=True, by="ana")
        assert record is not None and record.decision == "approved" and record.signatures[0].signer == "ana"
        results = await capability.deferred_results(requests)
        resumed = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert json.loads(resumed.output)["a"]["output"] == "bob"
