"""The inbox as a person uses it (issue 46), in Debian's chromium at a desktop's width (1280 px)
and a phone's (390 px): every page fits the screen (no sideways scroll, checked on the page and
on its full screenshot), a decision reads as what really happened (edited arguments as a diff
against the asked ones, an answer as the code received it, a denial as a denial, who and when
and how the run goes on, the next call), a refused form keeps what was typed and says why at
the form, sign-in comes back to the page asked for, times read in the viewer's zone, the list
keeps itself current and decides in bulk, keys work, and all of it without the script too.

The docs' screenshots come from here: CODEMODE_INBOX_SCREENSHOTS=docs/assets."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from codemode.client import display
from codemode.client.histories.audit import fetch_audit

from .inbox_fixtures import TOKEN
from .inbox_pages import ANA, MISSING, PAY, WIDTHS, fits, open_page

try:
    from playwright.async_api import expect
except ImportError:
    expect = None

pytestmark = pytest.mark.skipif(MISSING is not None and not os.environ.get("CI"), reason=MISSING or "")


@pytest.mark.parametrize("width", WIDTHS)
async def test_an_edited_approval_shows_what_ran(pages, browser, tmp_path: Path, width: int) -> None:
    handle, call_id = await pages.park()
    waiting, waiting_call = await pages.park(PAY.replace("1200", "80"))  # the next call to decide
    page = await open_page(browser, width)
    await page.goto(pages.call_url(handle.id, call_id))
    # What the call is, who started the run (the request's started_by, as everywhere), why.
    await expect(page.locator("h1")).to_have_text("send_money(to='acme-supplies', amount=1200)")
    await expect(page.locator("dl.facts").first).to_contain_text("Sends money: a person approves every call.")
    await expect(page.locator("dl.facts").first).to_contain_text("cy@example.com")
    await expect(page.locator("header.bar")).to_contain_text(f"signed in as {ANA}")
    await fits(page, tmp_path, "inbox-call", width)

    edit = page.locator("#edit")
    await edit.locator("textarea").fill('{"to": "acme-supplies", "amount": 1000}')
    await edit.get_by_label("Comment (optional)").fill("the invoice says 1000")
    await edit.get_by_role("button", name="Approve with these arguments").click()
    decision = page.locator("#decision")
    await expect(decision).to_contain_text(f"Approved by {ANA} in the inbox")
    await expect(decision).to_contain_text("the tool ran with these")
    # The title is the call as it ran; the call as asked is said under it.
    await expect(page.locator("h1")).to_have_text("send_money(to='acme-supplies', amount=1000)")
    await expect(page.locator(".asked-as")).to_contain_text("Asked as send_money(to='acme-supplies', amount=1200)")
    edited = decision.locator("tr.changed")
    await expect(edited.locator("td.was")).to_have_text("1200.0")  # what the tool would have received (issue 45: rules and people see validated values)
    await expect(edited.locator("td.now")).to_have_text("1000")
    await expect(decision.locator("tr.same")).to_contain_text("acme-supplies")
    await expect(decision).to_contain_text("Comment: the invoice says 1000")
    await expect(page.locator("a[rel=next]")).to_contain_text("send_money(to='acme-supplies', amount=80)")
    await fits(page, tmp_path, "inbox-decided", width)
    assert (await handle.result()).output == "paid 1000.0 to acme-supplies"

    # The history's line of the call that ran shows what it ran with, and the edit.
    lines = "\n".join(display.audit_lines(await fetch_audit(pages.client, handle.id)))
    assert "→ send_money(to='acme-supplies', amount=1000)  ✓" in lines, lines
    assert "edited: amount 1200.0 → 1000" in lines, lines
    assert "execution started (monty, 3 lines of code) by cy@example.com" in lines, lines

    # Once ended, the page says how: and the next call is a click away.
    await page.reload()
    await expect(page.locator("#decision")).to_contain_text("The run completed, with")
    await page.locator("a[rel=next]").click()
    await expect(page).to_have_url(pages.call_url(waiting.id, waiting_call))

    # Recent decisions: the edit as a diff, in words (no "Door").
    await page.goto(pages.url + "/decisions")
    row = page.locator("tr", has_text="amount=1200").first
    await expect(row.locator("del")).to_have_text("1200.0")
    await expect(row.locator("ins")).to_have_text("1000")
    await expect(row).to_contain_text("in the inbox")
    await expect(page.locator("th", has_text="Door")).to_have_count(0)
    await fits(page, tmp_path, "decisions-after-an-edit", width)
    await waiting.terminate("test over")
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_an_answer_and_a_denial_read_as_what_the_code_got(pages, browser, tmp_path: Path, width: int) -> None:
    page = await open_page(browser, width)
    answered, call_id = await pages.park()
    await page.goto(pages.call_url(answered.id, call_id))
    answer = page.locator("#answer")
    await answer.locator("textarea").fill('{"to": "acme-supplies", "amount": 0}')
    await answer.get_by_role("button", name="Give this result").click()
    decision = page.locator("#decision")
    await expect(decision).to_contain_text(f"Answered by {ANA} in the inbox")
    await expect(decision).to_contain_text("The tool did not run. The code received:")
    # What the code received: the tool returns a float, so 0 reached it as 0.0.
    await expect(decision.locator("pre")).to_contain_text('"amount": 0.0')
    assert (await answered.result()).output == "paid 0.0 to acme-supplies"
    # The history says so too, with the value as the code received it.
    lines = "\n".join(display.audit_lines(await fetch_audit(pages.client, answered.id)))
    said = 'answered instead of the tool by ana@example.com with {"to": "acme-supplies", "amount": 0.0}'
    assert said in lines, lines

    denied, call_id = await pages.park(
        "try:\n    send_money('mallory', 50)\n    r = 'sent'\nexcept PermissionError as e:\n    r = str(e)\nr"
    )
    await page.goto(pages.call_url(denied.id, call_id))
    deny = page.locator("#deny")
    await deny.get_by_label("Reason (the code sees it)").fill("unknown payee")
    await deny.get_by_role("button", name="Deny").click()
    decision = page.locator("section#decision.denied")
    await expect(decision).to_contain_text(f"Denied by {ANA} in the inbox")
    await expect(decision).to_contain_text("Reason: unknown payee")
    await expect(decision).to_contain_text("PermissionError")
    await expect(page.locator(".note.denied").first).to_contain_text("Denied as")
    assert "denied by ana@example.com: unknown payee" in (await denied.result()).output
    await fits(page, tmp_path, "inbox-denied", width)
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_a_refused_form_says_why_at_the_form_and_keeps_the_text(
    pages, browser, tmp_path: Path, width: int
) -> None:
    handle, call_id = await pages.park()
    page = await open_page(browser, width)
    await page.goto(pages.call_url(handle.id, call_id))
    edit = page.locator("#edit")
    box = edit.locator("textarea")
    # The edit box shows all of the asked arguments (nothing hidden behind its own scrollbar).
    assert await box.evaluate("t => t.scrollHeight <= t.clientHeight + 1 && t.scrollWidth <= t.clientWidth + 1")
    typed = '{"to": "acme-supplies",\n "amount": 1000\n "memo": 1}'
    await box.fill(typed)
    await edit.get_by_role("button", name="Approve with these arguments").click()
    error = page.locator("#edit .field-error")
    await expect(error).to_contain_text("the arguments are not valid JSON: at line 3, column 2")
    await expect(page.locator("#edit textarea")).to_have_value(typed)
    assert page.url.endswith("#edit")  # the page opens at the form that said no
    await fits(page, tmp_path, "inbox-refused", width)

    await page.locator("#edit textarea").fill('{"amount": "lots"}')
    await page.locator("#edit").get_by_role("button", name="Approve with these arguments").click()
    await expect(page.locator("#edit .field-error")).to_contain_text("the edited arguments do not fit send_money")
    await expect(page.locator("#edit textarea")).to_have_value('{"amount": "lots"}')
    text = await page.locator("main").inner_text()
    assert "Error:" not in text and "Exception" not in text, text
    await page.locator("#deny").get_by_role("button", name="Deny").click()  # no reason given:
    assert await page.locator("#deny input[name=comment]").evaluate("i => !i.validity.valid")  # the browser asks
    await handle.terminate("test over")
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_sign_in_returns_to_the_call_asked_for(pages, browser, tmp_path: Path, width: int) -> None:
    handle, call_id = await pages.park()
    page = await open_page(browser, width, who=None)
    asked = pages.call_url(handle.id, call_id)
    response = await page.goto(asked)
    assert response is not None and response.status == 401
    card = page.locator("main")
    await expect(card).to_contain_text("You are not signed in.")
    await expect(card).to_contain_text("sign in with the token you were given")
    assert await page.get_by_label("Token").get_attribute("type") == "password"
    await fits(page, tmp_path, "inbox-sign-in", width)
    await page.get_by_label("Token").fill(TOKEN)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page).to_have_url(asked)
    await expect(page.locator("header.bar")).to_contain_text("signed in as ben@example.com")
    # An address the inbox does not serve: its own page, in words, with the way back.
    response = await page.goto(pages.url + "/no/such/page")
    assert response is not None and response.status == 404
    await expect(page.locator("h1")).to_have_text("Not found")
    await expect(page.get_by_role("link", name="Back to the waiting calls")).to_be_visible()
    await fits(page, tmp_path, "inbox-not-found", width)

    # In dev (no way to sign in configured): the 401 says where dev printed the link, and the
    # token signs in the name dev was given (--user), back at the page asked for.
    dev = await open_page(browser, width, who=None)
    asked = f"{pages.dev.url}/calls/{handle.id}/{call_id}"
    response = await dev.goto(asked)
    assert response is not None and response.status == 401
    await expect(dev.locator("main")).to_contain_text("codemode dev printed a sign-in link in its terminal")
    await fits(dev, tmp_path, "inbox-sign-in-dev", width)
    assert pages.dev.login_url is not None
    await dev.get_by_label("Token").fill(pages.dev.login_url.split("token=", 1)[1])
    await dev.get_by_role("button", name="Sign in").click()
    await expect(dev).to_have_url(asked)
    await expect(dev.locator("header.bar")).to_contain_text(f"signed in as {ANA}")
    await handle.terminate("test over")
    await dev.context.close()
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_the_list_is_live_in_the_viewers_time_and_decides_in_bulk(
    pages, browser, tmp_path: Path, width: int
) -> None:
    first, first_call = await pages.park(started_by="cy@example.com")
    page = await open_page(browser, width, zone="Asia/Tokyo")
    dialogs: list[str] = []

    async def accept(dialog) -> None:  # noqa: ANN001
        dialogs.append(dialog.message)
        await dialog.accept()

    page.on("dialog", accept)
    await page.goto(pages.url + "/")
    row = page.locator(f"tr[data-key='{first.id}/{first_call}']")
    await expect(row).to_contain_text("cy@example.com")  # who started the run
    asked = row.locator("time")
    await expect(asked).not_to_contain_text("UTC")  # the script wrote it in Tokyo's time
    assert "(just now)" in await asked.inner_text() and "GMT+9" in (await asked.get_attribute("title") or "")
    await expect(row.locator("[data-left]")).to_have_text("6d 23h")
    # A call that begins to wait appears without a reload; the title counts them.
    second, second_call = await pages.park(PAY.replace("1200", "70"), started_by="dee@example.com")
    await expect(page.locator(f"tr[data-key='{second.id}/{second_call}']")).to_contain_text("dee@example.com")
    await expect(page).to_have_title("(2) Waiting · codemode approvals")
    await fits(page, tmp_path, "inbox-list", width)
    # The tool filter applies on change (the script submits it: no button to press).
    await expect(page.get_by_role("button", name="Show")).to_have_count(0)
    await page.get_by_label("Tool").select_option("send_money")
    await expect(page).to_have_url(pages.url + "/?tool=send_money")
    await expect(page.locator("h1")).to_have_text("Waiting for a decision: send_money")

    # Both selected, denied at once with one reason: one confirmation, each decided on its own.
    for handle, call in ((first, first_call), (second, second_call)):
        await page.locator(f"tr[data-key='{handle.id}/{call}'] input[name=call]").check()
    await page.get_by_label("Reason or comment for the selected calls").fill("not this month")
    await page.get_by_role("button", name="Deny selected").click()
    await expect(page.locator("h1")).to_have_text("2 of 2 decided")
    assert dialogs == [f"Deny 2 calls as {ANA}? Each is decided on its own."]
    for handle in (first, second):
        assert "denied by ana@example.com: not this month" in (await handle.result()).error.message
    await page.goto(pages.url + "/")
    await expect(page.locator("#waiting-empty")).to_be_visible()
    await expect(page).to_have_title("Waiting · codemode approvals")
    await page.goto(pages.url + "/decisions")
    await expect(page.locator("td", has_text="not this month").first).to_be_visible()
    await fits(page, tmp_path, "inbox-decisions", width)
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_every_page_works_without_the_script(pages, browser, tmp_path: Path, width: int) -> None:
    one, one_call = await pages.park()
    two, two_call = await pages.park(PAY.replace("1200", "60"))
    page = await open_page(browser, width, script=False)
    await page.goto(pages.url + "/")
    # Times in UTC with "ago" from the server; the filter's button shows instead of the script.
    await expect(page.locator(f"tr[data-key='{one.id}/{one_call}'] time")).to_contain_text("UTC (just now)")
    await page.get_by_label("Tool").select_option("send_money")
    await page.get_by_role("button", name="Show").click()
    await expect(page).to_have_url(pages.url + "/?tool=send_money")
    for handle, call in ((one, one_call), (two, two_call)):
        await page.locator(f"tr[data-key='{handle.id}/{call}'] input[name=call]").check()
    await page.get_by_role("button", name="Approve selected").click()
    # Without the script's dialog, a page asks once.
    await expect(page.locator("h1")).to_have_text("Approve 2 calls?")
    await fits(page, tmp_path, "inbox-bulk-confirm", width)
    await page.get_by_role("button", name="Approve 2 calls").click()
    await expect(page.locator("h1")).to_have_text("2 of 2 decided")
    assert (await one.result()).success and (await two.result()).success
    await page.context.close()


@pytest.mark.parametrize("width", WIDTHS)
async def test_keys_approve_deny_edit_and_next(pages, browser, width: int) -> None:
    handle, call_id = await pages.park()
    other, other_call = await pages.park(PAY.replace("1200", "50"))
    try:
        await _keys_approve_deny_edit_and_next(pages, browser, width, handle, call_id, other, other_call)
    finally:  # a failure leaves no waiting call behind for the next test's "n" to find first
        for h in (handle, other):
            with contextlib.suppress(Exception):
                await h.terminate("test over")


async def _keys_approve_deny_edit_and_next(pages, browser, width: int, handle, call_id, other, other_call) -> None:
    page = await open_page(browser, width)
    # On the list: / the tool filter, n the oldest waiting call.
    await page.goto(pages.url + "/")
    await page.keyboard.press("/")
    await expect(page.get_by_label("Tool")).to_be_focused()
    await page.locator("h1").click()
    await page.keyboard.press("n")
    await expect(page).to_have_url(pages.call_url(handle.id, call_id))
    # The keys listen from DOMContentLoaded on: a key pressed as soon as the URL changed was
    # once lost (a fresh-clone CI run).
    await page.wait_for_load_state("domcontentloaded")
    await page.keyboard.press("e")
    await expect(page.locator("#edit textarea")).to_be_focused()
    await page.keyboard.press("Escape")
    await page.locator("h1").click()
    await page.keyboard.press("d")
    await expect(page.locator("#deny input[name=comment]")).to_be_focused()
    await page.locator("h1").click()
    await page.keyboard.press("a")
    await expect(page.locator("#approve button")).to_be_focused()
    await page.keyboard.press("Enter")  # the focused button: approve
    await expect(page.locator("#decision")).to_contain_text(f"Approved by {ANA}")
    # (the keys listen from DOMContentLoaded on: the decision shows while the page still loads)
    await page.wait_for_load_state("domcontentloaded")
    await page.keyboard.press("n")
    await expect(page).to_have_url(pages.call_url(other.id, other_call))
    assert (await handle.result()).success
    await page.context.close()
