"""The inbox in a real browser (Debian's chromium driven by playwright), as a person behind a
sign-in proxy sees it: the waiting call, an argument edited then approved, a denial with a
reason, an answer instead of the tool. CODEMODE_INBOX_SCREENSHOTS=DIR keeps the screenshots
(the docs' come from here)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.workflows.models import CodeExecutionRequest
from tests.browser import CHROMIUM, CHROMIUM_FLAGS

from .conftest import read_events
from .test_decisions import parked

try:
    from playwright.async_api import async_playwright, expect
except ImportError:  # CI installs it: there a missing browser fails the test
    async_playwright = None

_missing = (
    "PyPI playwright is not installed"
    if async_playwright is None
    else f"{CHROMIUM} not found"
    if not shutil.which(CHROMIUM)
    else None
)
pytestmark = pytest.mark.skipif(_missing is not None and not os.environ.get("CI"), reason=_missing or "")

CODE = """# Pay the supplier, then tell them
receipt = send_money('acme-supplies', 1200)
f"paid {receipt['amount']} to {receipt['to']}"
"""


async def _shot(page, tmp_path: Path, name: str) -> None:
    await page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if keep := os.environ.get("CODEMODE_INBOX_SCREENSHOTS"):
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(tmp_path / f"{name}.png", Path(keep) / f"{name}.png")


async def test_a_person_edits_denies_and_answers_in_the_browser(
    client,
    task_queue,
    worker,
    inbox,
    events_file,
    tmp_path,
) -> None:
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        context = await browser.new_context(
            viewport={"width": 1100, "height": 900}, extra_http_headers={"X-Forwarded-Email": "ana@example.com"}
        )
        context.set_default_timeout(30_000)
        page = await context.new_page()
        try:
            # 1. Edit the amount, then approve.
            first = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
            await parked(first)
            await page.goto(inbox.url + "/")
            await expect(page.get_by_text("signed in as ana@example.com")).to_be_visible()
            await page.get_by_role("link", name="send_money(to='acme-supplies', amount=1200)").click()
            await expect(page.locator("span.here")).to_contain_text("receipt = send_money('acme-supplies', 1200)")
            await _shot(page, tmp_path, "inbox-call")
            edit = page.locator("form", has=page.get_by_role("button", name="Approve with these arguments"))
            await edit.locator("textarea").fill('{"to": "acme-supplies", "amount": 1000}')
            await edit.get_by_label("Comment (optional)").fill("the invoice says 1000")
            await edit.get_by_role("button", name="Approve with these arguments").click()
            await expect(page.get_by_text("Approved as ana@example.com.")).to_be_visible()
            outcome = await first.result()
            assert outcome.output == "paid 1000.0 to acme-supplies"
            assert [e["amount"] for e in read_events(events_file)] == [1000]
            approval = outcome.tool_calls[0].approval
            assert approval.asked_arguments == {"to": "acme-supplies", "amount": 1200}
            assert approval.approved_arguments == {"to": "acme-supplies", "amount": 1000}
            assert (approval.by, approval.door) == ("ana@example.com", "inbox")
            audit = await fetch_audit(client, first.id)
            text = "\n".join(e.text for e in audit.events)
            assert (
                "approved by ana@example.com, edited to amount=1000 (asked 1200): the invoice says 1000 (via inbox)"
                in text
            )

            # 2. Deny with a reason: the code gets PermissionError with it.
            code = (
                "try:\n    send_money('mallory', 50)\n    r = 'sent'\nexcept PermissionError as e:\n    r = str(e)\nr"
            )
            second = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
            (pending,) = (await parked(second)).pending_approvals
            await page.goto(f"{inbox.url}/calls/{second.id}/{pending.call_id}")
            deny = page.locator("form", has=page.get_by_role("button", name="Deny"))
            await deny.get_by_label("Reason (the code sees it)").fill("unknown payee")
            await deny.get_by_role("button", name="Deny").click()
            await expect(page.get_by_text("Denied as ana@example.com.")).to_be_visible()
            assert "denied by ana@example.com: unknown payee" in (await second.result()).output

            # 3. Answer instead of the tool: the code gets the value, the tool never runs.
            third = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
            (pending,) = (await parked(third)).pending_approvals
            await page.goto(f"{inbox.url}/calls/{third.id}/{pending.call_id}")
            answer = page.locator("form", has=page.get_by_role("button", name="Give this result"))
            await answer.locator("textarea").fill('{"to": "acme-supplies", "amount": 0}')
            await answer.get_by_role("button", name="Give this result").click()
            await expect(page.get_by_text("Answered as ana@example.com.")).to_be_visible()
            # The person's value as the tool returns it: Receipt.amount is a float, so 0 -> 0.0.
            assert (await third.result()).output == "paid 0.0 to acme-supplies"
            assert len(read_events(events_file)) == 1  # still only the first run's call

            await page.goto(inbox.url + "/decisions")
            await expect(page.get_by_text("unknown payee")).to_be_visible()
            await _shot(page, tmp_path, "inbox-decisions")
            fourth = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
            await parked(fourth)
            await page.goto(inbox.url + "/")
            await _shot(page, tmp_path, "inbox-list")
            await fourth.terminate("screenshot taken")
        finally:
            await browser.close()
