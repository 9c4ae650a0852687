"""The official MCP Python client over stdio against ``codemode mcp`` (a subprocess the client
starts), on both protocol eras: discovery among 303 tools, code that calls tools, and
approvals put to the person through the client's elicitation."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import Client

from codemode.client.histories.audit import fetch_audit
from tests.cli.runner import codemode
from tests.integrations.mcp_server.catalog_tools import GENERATED
from tests.integrations.mcp_server.clients import Person
from tests.integrations.mcp_server.conftest import CLIENT_NAME

EMAIL = "send_email(to='ana@example.com', subject='Weather', body='Paris: 18C')"


@pytest.fixture(params=["modern", "legacy"])
def session(request: pytest.FixtureRequest) -> Any:
    """A client on each protocol era the SDK speaks."""
    return request.getfixturevalue(request.param)


async def test_bad_input_starts_nothing(modern: Any, count_runs: Callable[[], Any]) -> None:
    """Runs first on the module's fresh task queue: refused calls start no execution, and the
    server keeps serving."""
    not_a_string = await modern.call_tool("execute", {"code": 42})
    assert not_a_string.is_error and "valid string" in not_a_string.content[0].text
    too_big = await modern.call_tool("execute", {"code": "x = 1\n" * 20_000})
    assert too_big.is_error and "over the 100,000 limit; nothing was started" in too_big.content[0].text
    runtime = await modern.call_tool("execute", {"code": "1", "runtime": "cobol"})
    assert runtime.is_error and "unknown runtime 'cobol'" in runtime.content[0].text
    unknown = await modern.call_tool("no_such_tool", {})
    assert unknown.is_error

    fine = await modern.call_tool("execute", {"code": "1 + 1"})
    assert fine.structured_content["status"] == "completed" and fine.structured_content["output"] == 2
    deadline = time.monotonic() + 15
    while (runs := await count_runs()) < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert runs == 1  # the one good call; visibility has caught up with it


async def test_lists_four_tools_and_no_way_to_approve(modern: Any) -> None:
    tools = {t.name: t for t in (await modern.list_tools()).tools}
    assert set(tools) == {"execute", "search", "get_schema", "result"}
    execute = tools["execute"]
    # 303 tools: the description points at search/get_schema instead of listing stubs.
    assert "303 host tools" in execute.description and "get_schema" in execute.description
    assert "def get_invoice" not in execute.description and len(execute.description.encode()) <= 2048
    assert set(execute.input_schema["properties"]) == {"code", "runtime", "session", "restart"}
    assert set(execute.output_schema["properties"]) == {
        "status",
        "execution_id",
        "output",
        "stdout",
        "error",
        "pending_approvals",
        "tool_calls",
        "artifacts",
        "note",
    }
    for tool in tools.values():  # nothing a model can call takes a decision
        assert not {"approve", "decision", "call_id"} & set(tool.input_schema.get("properties", {}))


async def test_search_and_get_schema_among_hundreds(modern: Any) -> None:
    found = await modern.call_tool("search", {"query": "restore an archived document", "limit": 5})
    hits = found.structured_content["tools"]
    assert found.structured_content["total_tools"] == len(GENERATED) + 3
    assert hits[0]["name"] == "restore_document", hits
    assert len(hits) == 5
    assert (
        hits[0]["signature"] == "restore_document(document_id: str, folder: str | None = None, note: str = '') -> dict"
    )

    email = await modern.call_tool("search", {"query": "email a message"})
    assert email.structured_content["tools"][0]["name"] == "send_email"

    schema = await modern.call_tool("get_schema", {"tools": ["restore_document", "get_weather"]})
    stubs = schema.content[0].text
    assert "def restore_document(document_id: str, folder: str | None = None, note: str = '') -> dict:" in stubs
    assert "def get_weather(city: str) -> dict:" in stubs and "def send_email" not in stubs

    wrong = await modern.call_tool("get_schema", {"tools": ["restore_documents", "wether"]})
    assert wrong.is_error
    assert "'restore_documents' (did you mean restore_document" in wrong.content[0].text
    assert "get_weather" in wrong.content[0].text


async def test_the_stubs_are_what_the_code_is_checked_against(modern: Any) -> None:
    """A call that does not fit get_schema's stub is a type error, in-band, before any call."""
    res = await modern.call_tool("execute", {"code": "restore_document(42)"})
    report = res.structured_content
    assert res.is_error and report["status"] == "failed" and report["tool_calls"] == []
    assert report["error"]["kind"] == "type", report["error"]


async def test_execute_code_that_calls_tools(session: Any) -> None:
    progress: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    code = (
        "import asyncio\n"
        "temps = [get_weather(c)['temp_c'] for c in ('Paris', 'Tokyo')]\n"
        "doc = restore_document('d-7', folder='archive')\n"
        "echo = await slow_echo('done', seconds=0.1)\n"
        "print('warmest', max(temps))\n"
        "{'temps': temps, 'doc': doc['tool'], 'echo': echo}"
    )
    res = await session.call_tool("execute", {"code": code}, progress_callback=on_progress)
    report = res.structured_content
    assert not res.is_error and report["status"] == "completed", res
    assert report["output"] == {"temps": [18, 24], "doc": "restore_document", "echo": "done"}
    assert report["stdout"] == "warmest 24\n"
    assert [c["summary"] for c in report["tool_calls"]] == [
        "get_weather(city='Paris')",
        "get_weather(city='Tokyo')",
        "restore_document(document_id='d-7', folder='archive')",
        "slow_echo(text='done', seconds=0.1)",
    ]
    assert "✓ completed · 4 tool calls" in res.content[0].text
    # One progress notification per tool call, as it finished.
    assert [m.split("  ")[0] for m in progress] == [f"→ {c['summary']}" for c in report["tool_calls"]]


async def test_a_failing_tool_is_an_exception_in_the_code(modern: Any) -> None:
    res = await modern.call_tool("execute", {"code": "get_weather('Atlantis')"})
    report = res.structured_content
    assert res.is_error and report["status"] == "failed"
    assert report["error"]["type"] == "ValueError" and "unknown city: Atlantis" in report["error"]["message"]
    assert report["error"]["line"] == 1


async def test_approval_accepted_through_the_client(session: Any, reset_person: Person, client: Client) -> None:
    reset_person.comment = "fine to send"
    res = await session.call_tool("execute", {"code": EMAIL})
    report = res.structured_content
    assert report["status"] == "completed", res
    assert len(reset_person.asked) == 1
    question = reset_person.asked[0]
    assert EMAIL in question and '"to": "ana@example.com"' in question and report["execution_id"] in question
    by = f"mcp:{CLIENT_NAME}"
    call = report["tool_calls"][0]
    assert {k: call["approval"][k] for k in ("decision", "by", "comment", "door")} == {
        "decision": "approved",
        "by": by,
        "comment": "fine to send",
        "door": "mcp",
    }
    assert call["result"]["sent"] is True
    # The audit (from Temporal's history): the call ran once, approved by the client's person.
    audit = await fetch_audit(client, report["execution_id"])
    sends = [c for c in audit.calls if c.tool == "send_email"]
    assert len(sends) == 1 and sends[0].attempts == 1 and sends[0].status == "ok"
    assert sends[0].approval is not None and sends[0].approval.by == by
    assert sends[0].approval.decision == "approved"


async def test_edited_then_approved_and_answered_through_the_client(session: Any, reset_person: Person) -> None:
    reset_person.arguments = '{"to": "bo@example.com"}'
    res = await session.call_tool("execute", {"code": EMAIL})
    call = res.structured_content["tool_calls"][0]
    assert call["result"]["to"] == "bo@example.com", res
    assert call["approval"]["approved_arguments"]["to"] == "bo@example.com"
    assert call["approval"]["asked_arguments"]["to"] == "ana@example.com"
    reset_person.arguments, reset_person.answer, reset_person.result = "", "answer", '{"sent": false}'
    res = await session.call_tool("execute", {"code": EMAIL})
    call = res.structured_content["tool_calls"][0]
    assert call["result"] == {"sent": False} and call["approval"]["answered"] is True, res


async def test_denied_through_the_client(session: Any, reset_person: Person) -> None:
    reset_person.answer, reset_person.comment = "deny", "not today"
    code = f"try:\n    {EMAIL}\n    said = 'sent'\nexcept PermissionError as err:\n    said = str(err)\nsaid"
    res = await session.call_tool("execute", {"code": code})
    report = res.structured_content
    assert report["status"] == "completed", res
    assert f"denied by mcp:{CLIENT_NAME}: not today" in report["output"]
    assert report["tool_calls"][0]["status"] == "denied"


async def test_declined_waits_for_a_person_out_of_band(
    session: Any, reset_person: Person, mcp_env: dict[str, str]
) -> None:
    """The person closes the question: the run parks durably; `codemode approve` decides it
    from a terminal and `result` returns the outcome."""
    reset_person.answer = "decline"
    res = await session.call_tool("execute", {"code": EMAIL})
    report = res.structured_content
    assert not res.is_error and report["status"] == "awaiting_approval", res
    execution_id = report["execution_id"]
    [waiting] = report["pending_approvals"]
    assert waiting["summary"] == EMAIL
    flag = f" --address {mcp_env['TEMPORAL_ADDRESS']}"  # not the default address: the commands name it
    assert waiting["approve"] == f"codemode approve {execution_id} {waiting['call_id']}{flag}"
    assert waiting["approve"] in reset_person.asked[0]
    assert waiting["approve"] in res.content[0].text and waiting["deny"] in res.content[0].text

    now = await session.call_tool("result", {"execution_id": execution_id})  # wait_seconds=0: where it stands
    assert now.structured_content["status"] == "awaiting_approval"

    ok = await codemode("approve", execution_id, waiting["call_id"], "--by", "alice", env=mcp_env)
    assert ok.rc == 0, ok
    done = await session.call_tool("result", {"execution_id": execution_id, "wait_seconds": 30})
    report = done.structured_content
    assert report["status"] == "completed", done
    assert report["tool_calls"][0]["approval"]["by"] == "alice"
    assert len(reset_person.asked) == 1  # asked once; result(wait 0) asks nobody


async def test_unanswered_question_times_out_to_awaiting_approval(
    legacy: Any, reset_person: Person, mcp_env: dict[str, str]
) -> None:
    """Handshake era: the server waits --approval-wait (3 s) for the answer, then parks."""
    reset_person.delay = 8
    started = time.monotonic()
    res = await legacy.call_tool("execute", {"code": EMAIL})
    report = res.structured_content
    assert report["status"] == "awaiting_approval", res
    assert time.monotonic() - started < reset_person.delay  # it did not wait for the late answer
    [waiting] = report["pending_approvals"]
    ok = await codemode("deny", report["execution_id"], waiting["call_id"], "--reason", "too late", env=mcp_env)
    assert ok.rc == 0, ok
    reset_person.delay = 0
    done = await legacy.call_tool("result", {"execution_id": report["execution_id"], "wait_seconds": 30})
    assert done.structured_content["status"] == "failed"
    assert "too late" in done.structured_content["error"]["message"]


async def test_a_run_longer_than_the_wait_is_running_then_result_has_it(legacy: Any) -> None:
    res = await legacy.call_tool("execute", {"code": "await slow_echo('late', seconds=8)"})
    report = res.structured_content
    assert report["status"] == "running" and not res.is_error, res
    assert f"result(execution_id='{report['execution_id']}', wait_seconds=60)" in res.content[0].text
    done = await legacy.call_tool("result", {"execution_id": report["execution_id"], "wait_seconds": 30})
    assert done.structured_content["status"] == "completed" and done.structured_content["output"] == "late"


async def test_result_of_an_unknown_execution(modern: Any) -> None:
    res = await modern.call_tool("result", {"execution_id": "exec-nope"})
    assert res.is_error and "no execution 'exec-nope'" in res.content[0].text


async def test_cells_of_a_session_share_their_namespace(modern: Any) -> None:
    name = f"mcp-{uuid.uuid4().hex[:8]}"
    first = await modern.call_tool(
        "execute",
        {"code": "w = get_weather('Paris')\ndef warm(x):\n    return x['temp_c'] > 15\nw['city']", "session": name},
    )
    assert first.structured_content["status"] == "completed", first
    assert first.structured_content["execution_id"] == f"session:{name}:1"
    second = await modern.call_tool("execute", {"code": "[w['city'], warm(w)]", "session": name})
    assert second.structured_content["output"] == ["Paris", True], second
    cleared = await modern.call_tool("execute", {"code": "w", "session": name, "restart": True})
    report = cleared.structured_content
    # w is gone: the type checker (which knows the session's names) refuses it before it runs
    assert report["status"] == "failed" and "`w`" in report["error"]["message"], cleared
    bad = await modern.call_tool("execute", {"code": "1", "session": "not a name!"})
    assert bad.is_error and "session" in bad.content[0].text
    other = await modern.call_tool("execute", {"code": "1", "session": name, "runtime": "python"})
    assert other.is_error and "monty" in other.content[0].text  # a cell on another runtime is refused
    loose = await modern.call_tool("execute", {"code": "1", "restart": True})
    assert loose.is_error and "restart applies to a session" in loose.content[0].text
