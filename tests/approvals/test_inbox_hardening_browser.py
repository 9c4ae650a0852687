"""The inbox's hardening in a real browser (issue 45; Debian's chromium through playwright): the
headers on every page (it cannot be framed), signing in by POST into a session cookie that is not
the token, a signed-in person who is not the link's approver, a short links secret refused when
the inbox loads, and a reminder's link past ``ttl``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from codemode.approvals.notify.channels import links_for
from codemode.approvals.notify.config import NotifyConfig
from codemode.approvals.notify.events import NotifyRequest
from codemode.apps.inbox.auth import COOKIE
from codemode.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest
from tests.browser import CHROMIUM, CHROMIUM_FLAGS, skip_without_a_browser

from .inbox_fixtures import LINKS_SECRET, TOKEN, link
from .test_decisions import SEND, parked

try:
    from playwright.async_api import async_playwright, expect
except ImportError:  # skipped below (CI installs it)
    async_playwright = expect = None

pytestmark = skip_without_a_browser()


async def test_the_inbox_is_not_framed_and_signs_in_by_post(client, task_queue, worker, inbox, tmp_path: Path) -> None:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            context = await browser.new_context()
            context.set_default_timeout(30_000)
            page = await context.new_page()
            # A token in the address signs nobody in.
            response = await page.goto(f"{inbox.url}/login?token={TOKEN}")
            assert response is not None
            headers = response.headers
            assert (
                headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in headers["content-security-policy"]
            )
            assert headers["cache-control"] == "no-store" and headers["referrer-policy"] == "no-referrer"
            assert not [c for c in await context.cookies() if c["name"] == COOKIE]
            # The form posts the token; the cookie that comes back is a session, not the token.
            await page.get_by_label("Token").fill(TOKEN)
            await page.get_by_role("button", name="Sign in").click()
            await expect(page.get_by_text("signed in as ben@example.com")).to_be_visible()
            (cookie,) = [c for c in await context.cookies() if c["name"] == COOKIE]
            assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and TOKEN not in cookie["value"]
            assert cookie["expires"] > time.time()
            # Framed by another page: the browser refuses to show the inbox in it.
            framing = tmp_path / "frame.html"
            framing.write_text(f'<iframe id="f" src="{inbox.url}/" width="600" height="400"></iframe>')
            await page.goto(framing.as_uri())  # (waits for the page's load: its frame's too)
            (framed,) = [f for f in page.frames if f is not page.main_frame]
            assert "signed in as" not in await framed.content() and not framed.url.startswith(inbox.url), framed.url
        finally:
            await browser.close()


async def test_a_link_decides_only_for_its_approver_signed_in(client, task_queue, worker, inbox) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    good = link(handle.id, pending.call_id, run_id=pending.run_id, arguments=pending.arguments)
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            ana = await browser.new_context(extra_http_headers={"X-Forwarded-Email": "ana@example.com"})
            page = await ana.new_page()
            response = await page.goto(f"{inbox.url}/link/{good}")
            assert response is not None and response.status == 403
            await expect(
                page.get_by_text("This link is for carol@example.com; you are signed in as ana@example.com.")
            ).to_be_visible()
            nobody = await (await browser.new_context()).new_page()
            response = await nobody.goto(f"{inbox.url}/link/{good}")
            assert response is not None and response.status == 401
            await expect(nobody.get_by_text("Sign in as carol@example.com to use this link.")).to_be_visible()
            assert (await parked(handle)).pending_approvals  # nothing decided
            carol = await (
                await browser.new_context(extra_http_headers={"X-Forwarded-Email": "carol@example.com"})
            ).new_page()
            await carol.goto(f"{inbox.url}/link/{good}")
            await carol.get_by_role("button", name="Confirm: approve as carol@example.com").click()
            await expect(carol.get_by_text(f"Approved call {pending.call_id}")).to_be_visible()
        finally:
            await browser.close()
    outcome = await handle.result()
    assert (outcome.tool_calls[0].approval.by, outcome.tool_calls[0].approval.door) == ("carol@example.com", "link")


async def test_a_reminder_link_past_ttl_and_a_short_secret_decide_nothing(client, task_queue, worker, inbox) -> None:
    from codemode.apps.inbox.auth import InboxAuth
    from codemode.apps.inbox.serve import start_inbox
    from codemode.worker.dev_server import free_port

    with pytest.raises(ValueError, match="at least 32 bytes"):
        await start_inbox(
            client, InboxAuth.build("X-Forwarded-Email", ["127.0.0.1"], None), port=free_port(), links_secret="short"
        )
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    config = NotifyConfig.model_validate(
        {"inbox_url": inbox.url, "links": {"secret": LINKS_SECRET, "ttl": "1h"}, "reminders": ["2h"]}
    )
    now = datetime.now(UTC)
    reminder = NotifyRequest(
        event="approval.reminder",
        execution_id=handle.id,
        call_id=pending.call_id,
        run_id=pending.run_id,
        tool=pending.tool,
        arguments=pending.arguments,
        asked_at=now - timedelta(days=2),
        deadline=now + timedelta(minutes=30),  # the reminder was due 90 minutes ago: its link lived 1 h
        reminder=0,
    )
    url = links_for(config, reminder, "carol@example.com")["approve"]
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            carol = await (
                await browser.new_context(extra_http_headers={"X-Forwarded-Email": "carol@example.com"})
            ).new_page()
            response = await carol.goto(url)
            assert response is not None and response.status == 403
            await expect(carol.get_by_text("this link has expired")).to_be_visible()
        finally:
            await browser.close()
    assert (await parked(handle)).pending_approvals
    await handle.terminate("test over")
