"""What the inbox's browser tests share (``test_inbox_pages.py``): a Temporal server of their
own (so the list holds only their calls, and the docs' screenshots only what they show), an
inbox on it, a worker that names that inbox's pages, chromium at a desktop's and a phone's
width, and the check that a page is no wider than the screen.

CODEMODE_INBOX_SCREENSHOTS=DIR keeps the screenshots the docs show (``DOCS``; run with ``-n 0``
and DIR ``docs/assets`` to regenerate them)."""

from __future__ import annotations

import os
import shutil
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.activities import ToolRegistry
from codemode.approvals.notify.config import Links, NotifyConfig
from codemode.apps.inbox.auth import InboxAuth, hash_token
from codemode.apps.inbox.serve import RunningInbox, start_inbox
from codemode.client.executions import start_execution
from codemode.worker.dev_server import free_port, start_local_environment
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest
from tests.browser import CHROMIUM, CHROMIUM_FLAGS

from .inbox_fixtures import LINKS_SECRET, TOKEN
from .test_decisions import parked

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # CI installs it: there a missing browser fails the test
    async_playwright = None

MISSING = (
    "PyPI playwright is not installed"
    if async_playwright is None
    else f"{CHROMIUM} not found"
    if not shutil.which(CHROMIUM)
    else None
)
#: A desktop and a phone (an iPhone 12-15 is 390 CSS pixels wide).
DESKTOP, PHONE = 1280, 390
WIDTHS = [pytest.param(DESKTOP, id="desktop"), pytest.param(PHONE, id="phone")]
#: Generous waits for what the page shows (the live list looks every 3 s); never asserted on.
WAIT_MS = 30_000
ANA = "ana@example.com"
#: The screenshots docs/guides/approvals-for-teams.md shows.
DOCS = {
    "inbox-call.png",
    "inbox-call-phone.png",
    "inbox-decided.png",
    "inbox-list.png",
    "inbox-list-phone.png",
    "inbox-decisions.png",
    "inbox-refused-phone.png",
}
TOOLS = "tests.approvals.team_tools"

PAY = """# Pay the supplier, then tell them
receipt = send_money('acme-supplies', 1200)
f"paid {receipt['amount']} to {receipt['to']}"
"""


class Pages:
    """The server, the inbox and the worker these tests share."""

    def __init__(self, client: Any, inbox: RunningInbox, dev: RunningInbox, task_queue: str) -> None:
        self.client, self.inbox, self.task_queue = client, inbox, task_queue
        #: The same calls in an inbox as ``codemode dev --user ana@example.com`` serves it (no
        #: way to sign in configured: a token made for ana, its link printed).
        self.dev = dev

    @property
    def url(self) -> str:
        return self.inbox.url

    def call_url(self, execution_id: str, call_id: str) -> str:
        return f"{self.url}/calls/{execution_id}/{call_id}"

    async def park(self, code: str = PAY, started_by: str = "cy@example.com") -> tuple[Any, str]:
        """A run waiting on its call: (its handle, the call's id)."""
        request = CodeExecutionRequest(code=code, started_by=started_by)
        handle = await start_execution(self.client, request, task_queue=self.task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        return handle, pending.call_id


@pytest.fixture(scope="module")
async def pages(converter: Any) -> AsyncIterator[Pages]:
    env = await start_local_environment(data_converter=converter)
    try:
        auth = InboxAuth.build("X-Forwarded-Email", ["127.0.0.1"], None)
        auth.users = {"ben@example.com": hash_token(TOKEN)}
        inbox = await start_inbox(env.client, auth, port=free_port(), links_secret=LINKS_SECRET)
        dev = await start_inbox(env.client, InboxAuth(), port=free_port(), person=ANA, printed_by="codemode dev")
        queue = f"pages-{uuid.uuid4().hex[:8]}"
        notify = NotifyConfig(inbox_url=inbox.url, links=Links(secret=LINKS_SECRET))
        worker = CodeModeWorker(env.client, ToolRegistry.from_module(TOOLS), task_queue=queue, notify=notify)
        try:
            async with worker.running():
                yield Pages(env.client, inbox, dev, queue)
        finally:
            await inbox.stop()
            await dev.stop()
    finally:
        await env.shutdown()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    if MISSING:
        pytest.fail(f"the inbox's browser tests need a browser: {MISSING}")
    expect.set_options(timeout=WAIT_MS)
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        await chromium.close()


async def open_page(
    browser: Browser, width: int, *, who: str | None = ANA, script: bool = True, zone: str = "Europe/Paris"
) -> Page:
    """A page at ``width`` CSS pixels, signed in as ``who`` through the proxy's header (None:
    nobody), in the time zone ``zone``."""
    headers = {"X-Forwarded-Email": who} if who else {}
    context = await browser.new_context(
        viewport={"width": width, "height": 900},
        extra_http_headers=headers,
        java_script_enabled=script,
        timezone_id=zone,
        is_mobile=width == PHONE,
        has_touch=width == PHONE,
    )
    context.set_default_timeout(WAIT_MS)
    return await context.new_page()


def _png_width(path: Path) -> int:
    return struct.unpack(">I", path.read_bytes()[16:20])[0]


async def fits(page: Page, tmp_path: Path, name: str, width: int) -> Path:
    """The page shows everything without sideways scrolling: nothing is wider than the screen
    (the document's scroll width, and a full-page screenshot exactly the viewport wide). The
    screenshot is kept (``-phone`` for the phone's) and returned."""
    wide = await page.evaluate(
        """() => {
            const w = window.innerWidth;
            const out = [];
            for (const el of document.body.querySelectorAll('*')) {
                const r = el.getBoundingClientRect();
                if (r.width && r.right > w + 1) {
                    out.push(`${el.tagName.toLowerCase()}.${el.className}: ${Math.round(r.right)}px`);
                }
            }
            return {scroll: document.documentElement.scrollWidth, viewport: w, wide: out.slice(0, 8)};
        }"""
    )
    shot = tmp_path / f"{name}{'-phone' if width == PHONE else ''}.png"
    await page.screenshot(path=str(shot), full_page=True)
    if (keep := os.environ.get("CODEMODE_INBOX_SCREENSHOTS")) and shot.name in DOCS:
        Path(keep).mkdir(parents=True, exist_ok=True)
        if width == PHONE:  # what the phone's screen shows (the whole page is long)
            await page.screenshot(path=str(Path(keep) / shot.name))
        else:
            shutil.copy(shot, Path(keep) / shot.name)
    print(f"screenshot: {shot}")
    assert wide["scroll"] <= wide["viewport"], f"{name} scrolls sideways at {width} px: {wide}"
    assert wide["wide"] == [], f"{name}: wider than the screen at {width} px: {wide['wide']}"
    assert _png_width(shot) == width, f"{name}: the full page is {_png_width(shot)} px wide at {width} px"
    return shot
