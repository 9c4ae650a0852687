"""The inbox over HTTP: who may see it, signed links (GET shows, POST decides; a used, altered
or expired link decides nothing), and bad input (a malformed or oversized form, an unknown
call, a call already decided): a clear error and nothing applied twice."""

from __future__ import annotations

import aiohttp
from yarl import URL

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.workflows.models import CodeExecutionRequest

from .conftest import read_events
from .inbox_fixtures import TOKEN, link
from .test_decisions import SEND, parked

ANA = {"X-Forwarded-Email": "ana@example.com"}


async def test_who_may_see_the_inbox(client, task_queue, worker, inbox) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    async with aiohttp.ClientSession() as http:
        async with http.get(inbox.url + "/") as resp:  # nobody
            assert resp.status == 401 and "sign in" in (await resp.text()).lower()
        async with http.get(inbox.url + "/", headers={"Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
        async with http.get(inbox.url + "/", headers=ANA) as resp:
            page = await resp.text()
            assert resp.status == 200 and "signed in as ana@example.com" in page
            assert (
                f"/calls/{handle.id}/{pending.call_id}" in page and "send_money(to=&#39;bob&#39;, amount=900)" in page
            )
        async with http.get(inbox.url + "/?tool=lookup", headers=ANA) as resp:
            assert f"/calls/{handle.id}/" not in await resp.text()
        # A path a proxy could route differently from how the inbox resolves it: refused.
        async with http.get(URL(inbox.url + "/link/%2e%2e/calls", encoded=True), headers=ANA) as resp:
            assert resp.status == 400
        async with http.get(inbox.url + "/", headers={"Authorization": f"Bearer {TOKEN}"}) as resp:
            assert "signed in as ben@example.com" in await resp.text()
        async with http.get(f"{inbox.url}/calls/{handle.id}/{pending.call_id}", headers=ANA) as resp:
            page = await resp.text()
            assert 'class="here" id="here"><i>1</i>r = send_money(&#39;bob&#39;, 900)' in page
    await handle.terminate("test over")


async def test_a_header_from_elsewhere_is_not_believed(client) -> None:
    from codemode.apps.inbox.auth import InboxAuth
    from codemode.apps.inbox.serve import start_inbox
    from codemode.worker.dev_server import free_port

    running = await start_inbox(client, InboxAuth.build("X-Forwarded-Email", ["10.1.2.3"], None), port=free_port())
    try:
        async with aiohttp.ClientSession() as http, http.get(running.url + "/", headers=ANA) as resp:
            assert resp.status == 401
    finally:
        await running.stop()


async def test_signed_link_shows_then_decides_once(client, task_queue, worker, inbox, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    good = link(handle.id, pending.call_id)
    altered = good[:-3] + ("A" if good[-3] != "A" else "B") + good[-2:]
    expired = link(handle.id, pending.call_id, expires_in=-5)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{inbox.url}/link/{altered}") as resp:
            assert resp.status == 403 and "altered" in await resp.text()
        async with http.post(f"{inbox.url}/link/{altered}") as resp:
            assert resp.status == 403
        async with http.post(f"{inbox.url}/link/{expired}") as resp:
            assert resp.status == 403 and "expired" in await resp.text()
        async with http.get(f"{inbox.url}/link/{good}") as resp:  # shows, decides nothing
            page = await resp.text()
            assert resp.status == 200 and "Confirm: approve as carol@example.com" in page
        assert (await parked(handle)).pending_approvals  # still waiting
        async with http.post(f"{inbox.url}/link/{good}") as resp:
            assert resp.status == 200 and "Approved call" in await resp.text()
        async with http.post(f"{inbox.url}/link/{good}") as resp:  # used
            assert resp.status == 409 and "not waiting" in await resp.text()
    outcome = await handle.result()
    assert outcome.success
    (call,) = outcome.tool_calls
    assert (call.approval.by, call.approval.door) == ("carol@example.com", "link")
    assert len(read_events(events_file)) == 1  # the tool ran once


async def test_bad_input_decides_nothing(client, task_queue, worker, inbox, events_file) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    url = f"{inbox.url}/calls/{handle.id}/{pending.call_id}"
    async with aiohttp.ClientSession(headers=ANA) as http:
        async with http.get(url) as resp:
            page = await resp.text()
        csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
        async with http.post(url, data={"action": "approve"}) as resp:  # no csrf: not from the page
            assert resp.status == 403
        async with http.post(url, data={"csrf": csrf, "action": "edit", "arguments": "{not json"}) as resp:
            assert resp.status == 400 and "not valid JSON" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "edit", "arguments": '{"amount": "lots"}'}) as resp:
            assert resp.status == 409 and "do not fit send_money" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "deny"}) as resp:
            assert resp.status == 400 and "say why" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "launch"}) as resp:
            assert resp.status == 400 and "unknown action" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "approve", "comment": "x" * 100_000}) as resp:
            assert resp.status == 413
        async with http.get(f"{inbox.url}/calls/{handle.id}/99") as resp:
            assert resp.status == 404 and "no call 99" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "approve"}) as resp:
            assert resp.status == 200 and "Approved as ana@example.com" in await resp.text()
        async with http.post(url, data={"csrf": csrf, "action": "approve"}) as resp:  # again
            assert resp.status == 409 and "Nothing was decided" in await resp.text()
    await handle.result()
    audit = await fetch_audit(client, handle.id)
    approvals = [e for e in audit.events if e.kind == "approval"]
    assert len(approvals) == 1 and "by ana@example.com" in approvals[0].text and "(via inbox)" in approvals[0].text
    assert len(read_events(events_file)) == 1
