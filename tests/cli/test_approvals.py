"""Approvals from the command line: a parked run exits 3 with the exact commands to decide it."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import get_args

import pytest

from codemode.activities import ToolRegistry
from codemode.worker.connection import connect
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ExecutionState
from tests.cli.runner import approve_command, codemode

pytestmark = pytest.mark.usefixtures("cli_worker")


async def park_email(env: dict[str, str]) -> tuple[str, str]:
    """Run examples/email.py without a terminal: it parks on send_email and exits 3."""
    res = await codemode("run", "examples/email.py", "--tools", "examples.tools", env=env)
    assert res.rc == 3, res
    assert (
        "→ send_email(to='ana@example.com', subject='Weather', body='Paris: 18C, cloudy')  ⏸ awaiting approval"
        in res.err
    )
    execution_id, call_id = approve_command(res.err)
    assert f"codemode deny {execution_id} {call_id}" in res.err
    return execution_id, call_id


async def test_approve_then_result(cli_env: dict[str, str]) -> None:
    execution_id, call_id = await park_email(cli_env)

    wrong = await codemode("approve", execution_id, "99", env=cli_env)
    assert wrong.rc == 2, wrong
    assert f"pending call ids: {call_id}" in wrong.err

    ok = await codemode("approve", execution_id, call_id, "--by", "alice", "--comment", "fine", env=cli_env)
    assert ok.rc == 0, ok
    assert f"approved call {call_id}" in ok.out and "as alice" in ok.out

    res = await codemode("result", execution_id, "--json", env=cli_env)
    assert res.rc == 0, res
    outcome = json.loads(res.out)
    assert outcome["output"] is True
    email = outcome["tool_calls"][-1]
    # (--json has every field, the defaulted ones too: issue 44)
    assert {k: v for k, v in email["approval"].items() if v not in (None, False, 0, [], {})} == {
        "decision": "approved",
        "by": "alice",
        "comment": "fine",
        "asked_arguments": {"to": "ana@example.com", "subject": "Weather", "body": "Paris: 18C, cloudy"},
        "door": "cli",
    }
    assert email["approval"]["answered"] is False

    history = await codemode("history", execution_id, env=cli_env)
    assert history.rc == 0, history
    assert "approved by alice: fine" in history.out
    audit = json.loads((await codemode("history", execution_id, "--json", env=cli_env)).out)
    send = next(c for c in audit["calls"] if c["tool"] == "send_email")
    assert send["approval"]["by"] == "alice" and send["approval"]["decision"] == "approved"
    assert send["status"] == "ok" and send["attempts"] == 1

    late = await codemode("approve", execution_id, call_id, env=cli_env)
    assert late.rc == 2 and "already closed" in late.err, late


async def test_approve_edited_arguments_and_answer_instead(cli_env: dict[str, str]) -> None:
    """`approve --args` runs the call with the person's arguments; `answer --result` gives the
    code a value and the tool never runs; `history` shows what was asked and what was approved."""
    execution_id, call_id = await park_email(cli_env)
    bad = await codemode("approve", execution_id, call_id, "--args", '{"to": 5}', env=cli_env)
    assert bad.rc == 2 and "argument 'to'" in bad.err, bad
    bad = await codemode("approve", execution_id, call_id, "--args", "{oops", env=cli_env)
    assert bad.rc == 2 and "--args is not JSON" in bad.err, bad
    ok = await codemode(
        "approve", execution_id, call_id, "--by", "alice", "--args", '{"to": "bo@example.com"}', env=cli_env
    )
    assert ok.rc == 0 and '"to": "bo@example.com"' in ok.out, ok
    outcome = json.loads((await codemode("result", execution_id, "--json", env=cli_env)).out)
    email = outcome["tool_calls"][-1]
    assert email["result"]["to"] == "bo@example.com"
    assert email["approval"]["asked_arguments"]["to"] == "ana@example.com"
    assert email["approval"]["approved_arguments"]["to"] == "bo@example.com"
    history = await codemode("history", execution_id, env=cli_env)
    assert "approved by alice, edited to to=\"bo@example.com\" (asked \"ana@example.com\") (via cli)" in history.out

    execution_id, call_id = await park_email(cli_env)
    bad = await codemode("answer", execution_id, call_id, "--result", "[1]", env=cli_env)
    assert bad.rc == 2 and "does not fit what send_email returns" in bad.err, bad
    ok = await codemode("answer", execution_id, call_id, "--by", "al", "--result", '{"sent": false}', env=cli_env)
    assert ok.rc == 0 and "answered call" in ok.out, ok
    outcome = json.loads((await codemode("result", execution_id, "--json", env=cli_env)).out)
    email = outcome["tool_calls"][-1]
    assert email["result"] == {"sent": False} and email["approval"]["answered"] is True
    history = await codemode("history", execution_id, env=cli_env)
    assert 'answered instead of the tool by al with {"sent": false} (via cli)' in history.out


async def test_deny_then_result_is_a_code_error(cli_env: dict[str, str]) -> None:
    execution_id, call_id = await park_email(cli_env)
    status = await codemode("status", execution_id, "--json", env=cli_env)
    assert json.loads(status.out)["state"] == "awaiting_approval"
    assert [p["call_id"] for p in json.loads(status.out)["pending_approvals"]] == [call_id]

    res = await codemode("deny", execution_id, call_id, "--by", "bob", "--reason", "not today", env=cli_env)
    assert res.rc == 0, res
    res = await codemode("result", execution_id, env=cli_env)
    assert res.rc == 1, res
    assert "PermissionError" in res.err and "denied by bob: not today" in res.err
    history = await codemode("history", execution_id, env=cli_env)
    assert "denied by bob: not today" in history.out


async def test_deny_defaults_to_the_os_user(cli_env: dict[str, str]) -> None:
    import getpass

    execution_id, call_id = await park_email(cli_env)
    res = await codemode("deny", execution_id, call_id, env=cli_env)
    assert res.rc == 0 and f"as {getpass.getuser()}" in res.out, res
    assert (await codemode("result", execution_id, env=cli_env)).rc == 1


WorkerFactory = Callable[[], AbstractAsyncContextManager[object]]
OwnQueue = Callable[[str], Awaitable[tuple[dict[str, str], WorkerFactory]]]


@pytest.fixture
def own_queue(temporal_address: str, cli_env: dict[str, str]) -> OwnQueue:
    """A task queue of its own, and a worker for it that runs in this process and can come and go."""

    async def make(tools_module: str) -> tuple[dict[str, str], WorkerFactory]:
        queue = f"cli-own-{uuid.uuid4().hex[:6]}"
        client = await connect(temporal_address)
        registry = ToolRegistry.from_module(tools_module)
        env = {**cli_env, "CODEMODE_TASK_QUEUE": queue}
        return env, lambda: CodeModeWorker(client, registry, task_queue=queue).running()

    return make


async def test_approve_lands_while_no_worker_runs(own_queue: OwnQueue) -> None:
    """The worker is gone during the wait: approve reads the pending call from the history,
    the signal is recorded, and a new worker finishes the run."""
    env, worker = await own_queue("examples.tools")
    async with worker():
        execution_id, call_id = await park_email(env)
    res = await codemode("approve", execution_id, call_id, "--by", "carol", env=env)
    assert res.rc == 0, res
    assert "no worker" in res.err
    async with worker():
        done = await codemode("result", execution_id, "--json", env=env)
    assert done.rc == 0, done
    assert json.loads(done.out)["tool_calls"][-1]["approval"]["by"] == "carol"


GATHERED = """import asyncio
a, b = await asyncio.gather(notify("ana", "hi"), notify("bob", "hi"))
[a["notified"], b["notified"]]
"""


@pytest.fixture
async def gather_env(own_queue: OwnQueue) -> AsyncIterator[dict[str, str]]:
    """A worker (in this process) for tests/cli/gather_tools.py on a task queue of its own."""
    env, worker = await own_queue("tests.cli.gather_tools")
    async with worker():
        yield env


async def park_gathered(env: dict[str, str]) -> str:
    res = await codemode("run", "-", "--json", env=env, stdin=GATHERED)
    assert res.rc == 3, res
    parked = json.loads(res.out)
    assert sorted(p["summary"] for p in parked["pending_approvals"]) == [
        "notify(who='ana', text='hi')",
        "notify(who='bob', text='hi')",
    ]
    return str(parked["execution_id"])


async def test_approve_all_decides_every_gathered_call(gather_env: dict[str, str]) -> None:
    execution_id = await park_gathered(gather_env)
    res = await codemode("approve", execution_id, "--all", "--by", "erin", env=gather_env)
    assert res.rc == 0, res
    assert res.out.count("✓ approved call") == 2 and "notify(who='bob', text='hi')" in res.out, res
    done = await codemode("result", execution_id, "--json", env=gather_env)
    assert done.rc == 0, done
    outcome = json.loads(done.out)
    assert outcome["output"] == ["ana", "bob"]
    assert [c["approval"]["by"] for c in outcome["tool_calls"]] == ["erin", "erin"]


async def test_deny_all_denies_every_gathered_call(gather_env: dict[str, str]) -> None:
    execution_id = await park_gathered(gather_env)
    res = await codemode("deny", execution_id, "--all", "--reason", "no spam", env=gather_env)
    assert res.rc == 0 and res.out.count("✓ denied call") == 2, res
    done = await codemode("result", execution_id, "--json", env=gather_env)
    assert done.rc == 1, done
    assert [c["status"] for c in json.loads(done.out)["tool_calls"]] == ["denied", "denied"]


async def test_decide_needs_one_call_id_or_all(cli_env: dict[str, str], gather_env: dict[str, str]) -> None:
    two = await park_gathered(gather_env)
    neither = await codemode("approve", two, env=gather_env)
    assert neither.rc == 2 and f"missing CALL_ID; pending call ids of {two}: 1, 2" in neither.err, neither
    assert (await codemode("deny", two, "--all", env=gather_env)).rc == 0

    execution_id, call_id = await park_email(cli_env)
    both = await codemode("deny", execution_id, call_id, "--all", env=cli_env)
    assert both.rc == 2 and "not both" in both.err, both
    one = await codemode("deny", execution_id, env=cli_env)  # exactly one call waits: no id needed
    assert one.rc == 0 and f"✓ denied call {call_id}" in one.out, one
    nothing = await codemode("approve", execution_id, "--all", env=cli_env)
    assert nothing.rc == 2, nothing  # closed by now, or at least nothing pending
    assert (await codemode("result", execution_id, env=cli_env)).rc == 1


async def test_cancel_a_parked_run(cli_env: dict[str, str]) -> None:
    from tests.cli.test_list import ids, listed

    execution_id, _ = await park_email(cli_env)
    res = await codemode("cancel", execution_id, "--reason", "changed my mind", env=cli_env)
    assert res.rc == 0, res
    assert f"cancelled {execution_id} (changed my mind)" in res.out

    got = await codemode("result", execution_id, env=cli_env)
    assert got.rc == 1, got
    assert f"execution {execution_id} was cancelled: changed my mind" in got.err
    got = await codemode("result", execution_id, "--json", env=cli_env)
    assert got.rc == 1 and json.loads(got.out) == {
        "execution_id": execution_id,
        "state": "cancelled",
        "reason": "changed my mind",
    }, got

    # Not waiting for anyone any more. (The status model says "cancelled" once the workflow has
    # that word; until then a run Temporal closed as cancelled reads "failed".)
    status = json.loads((await codemode("status", execution_id, "--json", env=cli_env)).out)
    assert status["state"] == ("cancelled" if "cancelled" in get_args(ExecutionState) else "failed")
    assert status["pending_approvals"] == []
    await listed(cli_env, "--status", "cancelled", until=lambda es: execution_id in ids(es))

    again = await codemode("cancel", execution_id, env=cli_env)
    assert again.rc == 2 and "already closed (cancelled); nothing to cancel" in again.err, again
    nobody = await codemode("cancel", "no-such-execution", env=cli_env)
    assert nobody.rc == 2 and "no execution 'no-such-execution'" in nobody.err, nobody


async def test_cancel_while_no_worker_runs(own_queue: OwnQueue) -> None:
    env, worker = await own_queue("examples.tools")
    async with worker():
        execution_id, _ = await park_email(env)
    res = await codemode("cancel", execution_id, env=env)
    assert res.rc == 0, res
    # (The server may still list the stopped worker as a poller: then cancel waits a while.)
    assert f"cancellation of {execution_id} requested (cancelled by " in res.out, res
    async with worker():
        got = await codemode("result", execution_id, env=env)
    assert got.rc == 1 and "was cancelled: cancelled by" in got.err, got
