"""The inbox shows undo before a person decides (issue 47), in a real browser (Debian's chromium
driven by playwright): the waiting call "can be undone" in the list and on its page, which
earlier calls "deny and roll back" would compensate, and that button doing it. A call whose tool
declares no compensation says "cannot be undone". CODEMODE_INBOX_SCREENSHOTS=DIR keeps the
screenshots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from .test_decisions import parked
from .test_inbox_browser import CHROMIUM, CHROMIUM_FLAGS, _shot, async_playwright, pytestmark  # noqa: F401

CODE = """# Pay two suppliers, then the big one
transfer('acme', 100)
transfer('bolt', 200)
payout('carbon', 5000)
"""


@pytest.fixture
async def undo_worker(client, task_queue: str, tmp_path: Path, monkeypatch) -> AsyncIterator[CodeModeWorker]:
    monkeypatch.setenv("CODEMODE_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    w = CodeModeWorker(client, ToolRegistry.from_module("tests.workflows.undo_tools"), task_queue=task_queue)
    async with w.running():
        yield w


async def test_the_inbox_shows_can_be_undone_and_denies_and_rolls_back(
    client, task_queue, undo_worker, inbox, events_file, tmp_path
) -> None:
    from playwright.async_api import expect

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        context = await browser.new_context(
            viewport={"width": 1100, "height": 900}, extra_http_headers={"X-Forwarded-Email": "ana@example.com"}
        )
        context.set_default_timeout(30_000)
        page = await context.new_page()
        try:
            run = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue)
            await parked(run)
            other = await start_execution(client, CodeExecutionRequest(code="ask('lunch?')"), task_queue=task_queue)
            await parked(other)
            await page.goto(inbox.url + "/")
            row = page.locator("tr", has=page.get_by_role("link", name="payout(to='carbon', amount=5000)"))
            await expect(row.locator(".undo-badge")).to_have_text("can be undone")
            plain = page.locator("tr", has=page.get_by_role("link", name="ask(question='lunch?')"))
            await expect(plain.locator(".undo-badge")).to_have_text("cannot be undone")
            await _shot(page, tmp_path, "inbox-undo-list")

            await row.get_by_role("link").click()
            panel = page.locator("#undo")
            await expect(panel.locator(".undo-badge")).to_have_text("can be undone")
            await expect(panel).to_contain_text("a rollback runs refund for it")
            items = panel.locator("ul.would li")
            await expect(items).to_have_text(
                ["2: transfer(to='bolt', amount=200)", "1: transfer(to='acme', amount=100)"]
            )
            await _shot(page, tmp_path, "inbox-undo-call")
            form = page.locator("form.deny-rollback")
            await expect(form).to_contain_text("2 earlier calls will be compensated, newest first")
            await form.get_by_label("Reason (recorded with the rollback)").fill("wrong supplier list")
            await form.get_by_role("button", name="Stop and roll back").click()
            await expect(page.get_by_text("Denied and rolled back as ana@example.com.")).to_be_visible()
            outcome = await asyncio.wait_for(run.result(), 60)
            assert [(e.call_id, e.state) for e in outcome.undo.entries] == [("1", "compensated"), ("2", "compensated")]
            assert outcome.undo.rollback.door == "inbox" and outcome.undo.rollback.by == "ana@example.com"
            assert outcome.undo.rollback.reason == "wrong supplier list"
            await other.cancel()
        finally:
            await browser.close()
