"""The Temporal web UI in a real headless browser (Debian's chromium driven by playwright) on
a run parked for approval: what a person finds on the workflow's page, and approving from it.

``codemode dev`` (embedded server with the UI, and a worker) runs on free ports with a
temporary data dir; ``examples/email.py`` parks on ``send_email``. Where things are in UI 2.54.1
(``/namespaces/default/workflows/<id>`` redirects to ``.../<id>/<run id>/timeline``):

* the **Memo** tab (``.../<run id>/memo``): the memo as JSON (``{"fields": {"pending_approvals":
  [...]}}``), read from the server, so it is there with no worker running;
* the **User Metadata** tab (``.../<run id>/user-metadata``): Summary and Details on the left,
  Current Details on the right, each markdown rendered in its own iframe
  (``#user-metadata-summary``, ``#user-metadata-details``, ``#user-metadata-current-details``).
  Current Details comes from the ``__temporal_workflow_metadata`` query: empty with no worker;
* **More Actions > Send a Signal**: a dialog whose signal list (with descriptions) also comes
  from that query; with no worker it asks for the name in a text field.

Full-page screenshots go to each test's tmp dir (``last.png``: the page as the test left it);
their paths are printed (``pytest -s``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.worker.dev_server import free_port
from tests.browser import CHROMIUM, CHROMIUM_FLAGS
from tests.cli.runner import Background, approve_command, base_env, codemode

#: Generous waits for the page (the UI fetches and renders after load); never asserted on.
PAGE_TIMEOUT_MS = 30_000

try:
    from playwright.async_api import Browser, Page, async_playwright, expect
except ImportError:  # reported by _missing_browser(): a skip here, a failure in CI
    pass


def _missing_browser() -> str | None:
    if "async_playwright" not in globals():
        return "PyPI playwright is not installed (pip install -e '.[dev]')"
    if not shutil.which(CHROMIUM):
        return f"{CHROMIUM} not found (apt-get install chromium)"
    return None


_missing = _missing_browser()
# .ci/run installs both: in CI a missing browser is a broken setup (the tests fail), not a skip.
pytestmark = pytest.mark.skipif(_missing is not None and not os.environ.get("CI"), reason=_missing or "")


class Dev:
    """``codemode dev`` on free ports: its environment and the UI's URL."""

    def __init__(self, env: dict[str, str], ui_url: str, process: Background) -> None:
        self.env, self.ui_url, self.process = env, ui_url, process

    def workflow_url(self, execution_id: str) -> str:
        return f"{self.ui_url}/namespaces/default/workflows/{execution_id}"


@pytest.fixture(scope="module")
async def dev(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Dev]:
    tmp = tmp_path_factory.mktemp("ui-dev")
    port, ui_port = free_port(), free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp / "data"))
    args = ("dev", "--tools", "examples.tools", "--port", str(port), "--ui-port", str(ui_port))
    process = await Background(*args, env=env, log=tmp / "dev.log").start("Worker ready", timeout=60)
    assert f"http://localhost:{ui_port}" in process.output(), process.output()
    yield Dev(env, f"http://localhost:{ui_port}", process)
    assert await process.stop() == 0, process.output()


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    if _missing:
        pytest.fail(f"the web UI tests need a browser: {_missing}")
    expect.set_options(timeout=PAGE_TIMEOUT_MS)
    async with async_playwright() as pw:
        chromium = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        await chromium.close()


@pytest.fixture
async def page(browser: Browser, tmp_path: Path) -> AsyncIterator[Page]:

    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(PAGE_TIMEOUT_MS)
    pg = await context.new_page()
    yield pg
    # The page as the test left it (on a failure: what the assertion saw).
    with contextlib.suppress(Exception):
        await screenshot(pg, tmp_path / "last.png")
    await context.close()


async def park_email(dev: Dev) -> tuple[str, str]:
    """examples/email.py without a terminal: parked on send_email, exit code 3."""
    res = await codemode("run", "examples/email.py", env=dev.env)
    assert res.rc == 3, res
    return approve_command(res.err)


async def screenshot(page: Page, path: Path) -> Path:
    await page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


async def open_workflow(page: Page, dev: Dev, execution_id: str) -> str:
    """Open the workflow by id; the UI redirects to its latest run. Returns the run's URL
    (``.../workflows/<id>/<run id>``) once the page shows the workflow's header."""

    await page.goto(dev.workflow_url(execution_id), wait_until="domcontentloaded")
    # The UI polls a running workflow, so the network never goes idle: wait for what we need.
    await page.wait_for_url(re.compile(rf"/workflows/{re.escape(execution_id)}/[0-9a-f-]{{36}}/"))
    await expect(page.get_by_role("heading", name=execution_id)).to_be_visible()
    await expect(page.get_by_role("tab", name="Memo")).to_be_visible()
    return page.url.rsplit("/", 1)[0]


async def test_a_parked_run_shows_the_pending_call_and_the_approve_command(
    dev: Dev, page: Page, tmp_path: Path
) -> None:
    execution_id, call_id = await park_email(dev)
    approve = f"codemode approve {execution_id} {call_id}"

    await open_workflow(page, dev, execution_id)
    await expect(page.get_by_role("status").first).to_have_text("Running")
    # The first thing the workflow's page shows, its Timeline: the wait, and the call's page in
    # the inbox dev serves (issue 46), not behind a tab.
    inbox_page = re.compile(rf"waits for a person, decide at http://127\.0\.0\.1:\d+/calls/{execution_id}/{call_id}")
    await expect(page.get_by_text(inbox_page).first).to_be_visible()
    await screenshot(page, tmp_path / "1-timeline.png")

    # User Metadata: Summary, Details (the code) and Current Details (from the worker's query).
    await page.get_by_role("tab", name="User Metadata").click()
    await page.wait_for_url(re.compile(r"/user-metadata$"))
    summary = page.frame_locator("#user-metadata-summary").locator("body")
    current = page.frame_locator("#user-metadata-current-details").locator("body")
    await expect(summary).to_contain_text("Needs approval")  # the code's leading comment
    await expect(current).to_contain_text("send_email")
    await expect(current).to_contain_text(re.compile(rf"Decide in the inbox: http://127\.0\.0\.1:\d+/calls/{execution_id}"))
    await screenshot(page, tmp_path / "2-user-metadata.png")
    current_text = await current.inner_text()
    # The code is readable: the UI cuts a code block at its column's edge, so no line is longer.
    for frame in ("#user-metadata-details", "#user-metadata-current-details"):
        block = page.frame_locator(frame).locator("pre").first
        assert await block.evaluate("pre => pre.scrollWidth <= pre.clientWidth"), f"{frame}: code cut at the edge"

    # Memo: stored with the execution, shown with no worker running.
    await page.get_by_role("tab", name="Memo").click()
    await page.wait_for_url(re.compile(r"/memo$"))
    memo = page.get_by_role("main")
    await expect(memo.get_by_role("heading", name="Memo")).to_be_visible()
    await screenshot(page, tmp_path / "3-memo.png")
    memo_text = await memo.inner_text()

    print(f"current details: {current_text!r}")
    print(f"memo tab: {memo_text[memo_text.rfind('Memo') :]!r}")
    assert "send_email" in current_text and call_id in current_text, current_text
    assert approve in current_text, f"Current Details does not name the approve command:\n{current_text}"
    assert "pending_approvals" in memo_text, f"no pending_approvals in the memo:\n{memo_text}"
    assert "send_email" in memo_text and f'"call_id": "{call_id}"' in memo_text, memo_text
    assert approve in memo_text, memo_text


async def test_send_a_signal_from_the_ui_approves_the_call(dev: Dev, page: Page, tmp_path: Path) -> None:
    execution_id, call_id = await park_email(dev)
    await open_workflow(page, dev, execution_id)

    await page.get_by_role("button", name="More Actions").click()
    await page.get_by_role("menuitem", name="Send a Signal").click()
    dialog = page.get_by_role("dialog")
    await dialog.get_by_test_id("signal-select-button").click()
    # The signal names (and their descriptions) come from the worker's metadata query.
    await dialog.get_by_role("option", name=re.compile(r"^approve\b")).click()
    await dialog.get_by_role("textbox", name="Data").click()
    await page.keyboard.insert_text(json.dumps({"call_id": call_id, "by": "ana"}))
    # Leave the editor first: while it has focus, a click on Submit only blurs it (it reformats
    # the JSON and re-renders the form) and nothing is sent.
    await page.keyboard.press("Tab")
    await screenshot(page, tmp_path / "1-send-a-signal.png")
    await dialog.get_by_test_id("confirm-modal-button").click()
    await expect(dialog).to_be_hidden()

    res = await codemode("result", execution_id, "--json", env=dev.env)
    assert res.rc == 0, res
    assert json.loads(res.out)["output"] is True
    history = await codemode("history", execution_id, env=dev.env)
    assert history.rc == 0 and "approved by ana" in history.out, history

    await expect(page.get_by_role("status").first).to_have_text("Completed")
    await screenshot(page, tmp_path / "2-completed.png")


async def test_with_no_worker_the_memo_still_shows_the_call_and_a_signal_approves_it(
    page: Page, tmp_path: Path
) -> None:
    """The server alone (no worker polling): the memo is read from the server, the signal is
    recorded by it, and a worker started later acts on the decision."""

    port, ui_port = free_port(), free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    server = await Background(
        "server", "--port", str(port), "--ui-port", str(ui_port), env=env, log=tmp_path / "server.log"
    ).start("Ready.", timeout=60)
    try:
        worker = await Background("worker", "--tools", "examples.tools", env=env, log=tmp_path / "worker1.log").start(
            "Worker ready"
        )
        res = await codemode("run", "examples/email.py", env=env)
        assert await worker.stop() == 0, worker.output()
        assert res.rc == 3, res
        execution_id, call_id = approve_command(res.err)

        dev = Dev(env, f"http://localhost:{ui_port}", server)
        await open_workflow(page, dev, execution_id)
        await page.get_by_role("tab", name="Memo").click()
        memo = page.get_by_role("main")
        await expect(memo).to_contain_text(f"codemode approve {execution_id} {call_id}")
        await screenshot(page, tmp_path / "1-memo-no-worker.png")

        # With no worker the UI cannot list the signals (they come from a query): the dialog
        # asks for the name in a text field instead.
        await page.get_by_role("button", name="More Actions").click()
        await page.get_by_role("menuitem", name="Send a Signal").click()
        dialog = page.get_by_role("dialog")
        await dialog.get_by_test_id("signal-name").fill("approve")
        await dialog.get_by_role("textbox", name="Data").click()
        await page.keyboard.insert_text(json.dumps({"call_id": call_id, "by": "ana"}))
        await page.keyboard.press("Tab")
        await screenshot(page, tmp_path / "2-signal-by-name.png")
        await dialog.get_by_test_id("confirm-modal-button").click()
        await expect(dialog).to_be_hidden()

        # The decision waits in the history; a worker started now acts on it.
        worker = await Background("worker", "--tools", "examples.tools", env=env, log=tmp_path / "worker2.log").start(
            "Worker ready"
        )
        try:
            res = await codemode("result", execution_id, "--json", env=env)
            assert res.rc == 0, res
            assert json.loads(res.out)["output"] is True
            history = await codemode("history", execution_id, env=env)
            assert "approved by ana" in history.out, history
        finally:
            assert await worker.stop() == 0, worker.output()
    finally:
        assert await server.stop() == 0, server.output()
