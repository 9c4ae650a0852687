"""A snippet's calls get the usual approvals; only a grant its promoter signed over the snippet's
version and parameter schema lets them run unasked, and only the snippet's own calls (issue 48).
A real dev server and worker with an approvers file and real Ed25519 keys; Monty, and the
python runtime where the host cannot tell a snippet's calls from the code's."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution, start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.client.signing import Signer
from codemode.client.snippets import grant, library_of, promote
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, DenySignal
from tests.approvers.helpers import Person, people_toml, wait_parked, write_file

from .conftest import TOOLS_MODULE, read_events

SEND = """\
# Sends the week's sales total to someone.
rows = sales(week)
send_report(to, sum(r["amount"] for r in rows))"""

ANA = Person("ana")


@pytest.fixture
async def worker(client, task_queue, tmp_path):
    path = write_file(tmp_path / "approvers.toml", people_toml((ANA, [])))
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue, approvers=path).running() as w:
        yield w


def signer() -> Signer:
    return Signer("ana", ANA.key)


async def approve_when_parked(handle) -> None:
    (call,) = (await wait_parked(handle)).pending_approvals
    await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=ANA.sign(handle.id, call)))


async def promoted(client, task_queue, name: str, code: str = SEND):
    handle = await start_execution(
        client, CodeExecutionRequest(code=code, inputs={"week": 1, "to": "boss@example.com"}), task_queue=task_queue
    )
    await approve_when_parked(handle)  # the run that worked: a person approved its report
    assert (await handle.result()).success
    saved, _ = await promote(client, handle.id, name, signer=signer(), require_signature=True)
    return saved


async def test_calls_park_like_any_code_until_a_signed_grant_covers_them(client, task_queue, worker, events_file) -> None:
    saved = await promoted(client, task_queue, "send_weekly")
    assert saved.provenance.signature is not None and saved.provenance.signature.signer == "ana"
    call = "snippets.send_weekly(week=2, to='team@example.com')['total']"

    # No grant: the snippet's call waits for a person like any call.
    handle = await start_execution(client, CodeExecutionRequest(code=call), task_queue=task_queue)
    (pending,) = (await wait_parked(handle)).pending_approvals
    assert pending.tool == "send_report" and pending.kwargs == {} and pending.args == ["team@example.com", 63]
    await handle.signal("approve", ApproveSignal(call_id=pending.call_id, signature=ANA.sign(handle.id, pending)))
    assert (await handle.result()).output == 63

    # ana grants the calls of this version: the same call runs unasked, and the audit says why.
    signed = await grant(client, "send_weekly", signer(), note="weekly reports go out")
    assert signed.version == saved.version and signed.tools == ["sales", "send_report"]
    outcome = await asyncio.wait_for(run_execution(client, CodeExecutionRequest(code=call), task_queue=task_queue), 60)
    assert outcome.success and outcome.output == 63
    report = next(c for c in outcome.tool_calls if c.tool == "send_report")
    assert report.approval is None and report.granted is not None
    assert (report.granted.grant_id, report.granted.signer, report.granted.version) == (
        signed.grant_id,
        "ana",
        saved.version,
    )
    audit = await fetch_audit(client, outcome.execution_id)
    assert any(f"grant {signed.grant_id} of snippet send_weekly" in e.text for e in audit.events)

    # Code that calls the tool itself gets no grant: only the snippet's own call runs unasked.
    mixed = (
        "r = snippets.send_weekly(week=3, to='team@example.com')\n"
        "try:\n    send_report('eve@example.com', 1)\n    direct = 'sent'\n"
        "except PermissionError:\n    direct = 'denied'\n"
        "[r['total'], direct]"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=mixed), task_queue=task_queue)
    (pending,) = (await wait_parked(handle)).pending_approvals
    assert pending.args == ["eve@example.com", 1]
    await handle.signal("deny", DenySignal(call_id=pending.call_id, signature=ANA.sign(handle.id, pending, "deny")))
    assert (await handle.result()).output == [93, "denied"]

    # An edited snippet is another version: the grant does not cover it (the old one still runs).
    edited = await promoted(client, task_queue, "send_weekly", SEND.replace("sum(", "1 + sum("))
    assert edited.version != saved.version
    handle = await start_execution(client, CodeExecutionRequest(code=call), task_queue=task_queue)
    (pending,) = (await wait_parked(handle)).pending_approvals
    assert pending.args == ["team@example.com", 64]
    await handle.cancel()
    pinned = await run_execution(
        client, CodeExecutionRequest(code=call, snippets={"send_weekly": saved.version}), task_queue=task_queue
    )
    assert pinned.success and pinned.output == 63
    sent = [e["arg"] for e in read_events(events_file) if e["event"] == "start" and e["arg"].startswith("send:")]
    assert "send:eve@example.com" not in sent


async def test_a_grant_counts_only_signed_by_a_listed_approver_and_unexpired(client, task_queue, worker) -> None:
    await promoted(client, task_queue, "send_daily")
    library = await library_of(client)
    mallory = Person("mallory")  # a key the approvers file does not list
    await grant(client, "send_daily", Signer("mallory", mallory.key))
    await grant(client, "send_daily", signer(), expires_in=timedelta(seconds=-1))
    assert len(await library.grants("send_daily")) == 2
    handle = await start_execution(
        client, CodeExecutionRequest(code="snippets.send_daily(week=1, to='x@example.com')"), task_queue=task_queue
    )
    (pending,) = (await wait_parked(handle)).pending_approvals
    assert "grant does not cover it" in (pending.reason or "")
    await handle.cancel()


async def test_an_unsigned_snippet_is_refused_under_an_approvers_file(client, task_queue, worker) -> None:
    source = await run_execution(
        client, CodeExecutionRequest(code="sales(week)", inputs={"week": 1}), task_queue=task_queue
    )
    await promote(client, source.execution_id, "unsigned_sales", by="ana")
    outcome = await run_execution(
        client, CodeExecutionRequest(code="snippets.unsigned_sales(week=2)"), task_queue=task_queue
    )
    assert not outcome.success and outcome.error.type == "SnippetError" and "not signed" in outcome.error.message


async def test_python_runtime_grants_only_a_run_that_is_the_snippet_alone(client, task_queue, worker) -> None:
    """CPython runs the code in-process with the runner: the host cannot tell which calls the
    snippet made, so a grant applies only when the whole code is one call of it."""
    await promoted(client, task_queue, "send_hourly")
    await grant(client, "send_hourly", signer())
    alone = await run_execution(
        client,
        CodeExecutionRequest(code="snippets.send_hourly(week=1, to='x@example.com')", runtime="python"),
        task_queue=task_queue,
    )
    assert alone.success, alone.error
    assert next(c for c in alone.tool_calls if c.tool == "send_report").granted is not None
    mixed = "x = 1\nsnippets.send_hourly(week=1, to='x@example.com')"
    handle = await start_execution(client, CodeExecutionRequest(code=mixed, runtime="python"), task_queue=task_queue)
    (pending,) = (await wait_parked(handle)).pending_approvals
    assert pending.tool == "send_report"
    await approve_when_parked(handle)
    assert (await handle.result()).success
