"""Deciding a session's cell by the session's id. A person finds the session (``session:NAME``)
as the agent workflow's child in the UI, or knows its NAME from ``codemode session list``:
``approve``, ``deny`` and ``status`` on it act on its running cell (``session:NAME:N``), and
``session show`` says that cell waits for approval, on which call, instead of ``running``."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.cli.runner import approve_command, codemode

pytestmark = pytest.mark.usefixtures("cli_worker")

EMAIL = "send_email(to='ana@example.com', subject='Weather', body='Paris: 18C, cloudy')"


async def park_cell(env: dict[str, str], session: str, index: int) -> str:
    """examples/email.py as cell ``index`` of ``session``: it parks on send_email (exit 3)."""
    res = await codemode("run", "examples/email.py", "--tools", "examples.tools", "--session", session, env=env)
    assert res.rc == 3, res
    execution_id, call_id = approve_command(res.err)
    assert execution_id == f"session:{session}:{index}", res
    return call_id


async def test_approve_deny_and_status_by_the_session(cli_env: dict[str, str]) -> None:
    session = f"s-{uuid.uuid4().hex[:8]}"
    call_id = await park_cell(cli_env, session, 1)
    cell = f"session:{session}:1"

    shown = await codemode("session", "show", session, env=cli_env)
    assert shown.rc == 0, shown
    assert f"⏸ cell 1 [{cell}] awaiting_approval" in shown.out, shown
    assert f"waits for approval of call {call_id}: {EMAIL}" in shown.out, shown
    assert f"codemode approve {cell}" in shown.err, shown
    as_json = json.loads((await codemode("session", "show", session, "--json", env=cli_env)).out)
    assert as_json["running"]["execution_id"] == cell and as_json["running"]["state"] == "awaiting_approval"

    for named in (f"session:{session}", session):  # the session's id, or its bare name
        status = await codemode("status", named, "--json", env=cli_env)
        assert status.rc == 0, status
        assert f"session {session}: its running cell is {cell}" in status.err, status
        current = json.loads(status.out)
        assert current["state"] == "awaiting_approval", current
        assert [p["call_id"] for p in current["pending_approvals"]] == [call_id]
    status = await codemode("status", f"session:{session}", env=cli_env)
    assert f"{cell}: awaiting_approval" in status.out and f"codemode approve {cell} {call_id}" in status.out, status

    approved = await codemode("approve", f"session:{session}", "--all", "--by", "alice", env=cli_env)
    assert approved.rc == 0, approved
    assert f"✓ approved call {call_id} ({EMAIL}) of {cell} as alice" in approved.out, approved
    outcome = await codemode("result", cell, "--json", env=cli_env)
    assert outcome.rc == 0, outcome
    assert json.loads(outcome.out)["tool_calls"][-1]["approval"]["by"] == "alice"

    call_id = await park_cell(cli_env, session, 2)
    denied = await codemode("deny", session, call_id, "--by", "bob", "--reason", "not today", env=cli_env)
    assert denied.rc == 0 and f"denied call {call_id}" in denied.out and f"session:{session}:2" in denied.out, denied
    outcome = await codemode("result", f"session:{session}:2", env=cli_env)
    assert outcome.rc == 1 and "denied by bob: not today" in outcome.err, outcome

    # Nothing runs now: nothing to decide, and the status is the session's.
    idle = await codemode("approve", f"session:{session}", "--all", env=cli_env)
    assert idle.rc == 2 and f"no cell of session {session} is running" in idle.err, idle
    status = await codemode("status", f"session:{session}", env=cli_env)
    assert status.rc == 0 and f"session {session}: open (monty), 2 cells" in status.out, status
    shown = await codemode("session", "show", session, env=cli_env)
    assert "awaiting_approval" not in shown.out and f"✓ cell 1 [{cell}] completed" in shown.out, shown


async def test_an_unknown_id_is_still_no_execution(cli_env: dict[str, str]) -> None:
    res = await codemode("approve", "no-such-thing", "--all", env=cli_env)
    assert res.rc == 2 and "no execution 'no-such-thing'" in res.err, res
