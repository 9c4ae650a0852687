"""The inbox's security over HTTP (issue 45, finding 6): each test fails if its finding comes
back. On main 85705d4: ``--trusted-proxy 0.0.0.0/0`` was accepted; a repeated identity header
took the first; no ``frame-ancestors``, ``no-store`` or ``Referrer-Policy`` on pages with tokens;
the login token travelled in a GET query string and the cookie held the raw token; an identity
with ``+`` gave a 500; link secrets of any length were accepted, reminder links ignored ``ttl``,
links carried neither the run nor the arguments, and a link decided for the person it named
even when someone else was signed in."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from codemode.approvals.notify.channels import links_for
from codemode.approvals.notify.config import NotifyConfig
from codemode.approvals.notify.events import NotifyRequest
from codemode.approvals.notify.signing import LinkError, read_link_token
from codemode.apps.inbox.app import SECURITY_HEADERS
from codemode.apps.inbox.auth import COOKIE, AuthConfigError, InboxAuth, hash_token, proxy_networks
from codemode.client.executions import start_execution
from codemode.workflows.models import CodeExecutionRequest

from .inbox_fixtures import LINKS_SECRET, TOKEN, link
from .test_decisions import SEND, parked

ANA = {"X-Forwarded-Email": "ana@example.com"}


def _secure(resp: aiohttp.ClientResponse) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert resp.headers.get(name) == value, (resp.url, name, resp.headers.get(name))


async def test_every_page_is_never_framed_cached_or_referred(client, task_queue, worker, inbox) -> None:
    handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
    (pending,) = (await parked(handle)).pending_approvals
    good = link(handle.id, pending.call_id, run_id=pending.run_id, arguments=pending.arguments)
    async with aiohttp.ClientSession() as http:
        for path, headers in (
            ("/", ANA),  # 200
            ("/", {}),  # 401
            ("/login", {}),
            (f"/calls/{handle.id}/{pending.call_id}", ANA),
            (f"/calls/{handle.id}/99", ANA),  # 404
            (f"/link/{good}", {"X-Forwarded-Email": "carol@example.com"}),
            ("/link/nonsense", {}),  # 403
            ("/healthz", {}),
            ("/", {"X-Forwarded-Email": "bad name"}),  # 400
        ):
            async with http.get(inbox.url + path, headers=headers, allow_redirects=False) as resp:
                _secure(resp)
        async with http.post(inbox.url + "/login", data={"token": TOKEN}, allow_redirects=False) as resp:
            assert resp.status == 303
            _secure(resp)
    await handle.terminate("test over")


async def test_login_is_a_post_answered_by_a_session_that_is_not_the_token(inbox) -> None:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as http:
        async with http.get(f"{inbox.url}/login?token={TOKEN}", allow_redirects=False) as resp:
            assert resp.status == 200 and COOKIE not in resp.cookies  # a token in an address signs nobody in
        async with http.get(inbox.url + "/") as resp:
            assert resp.status == 401
        async with http.post(inbox.url + "/login", data={"token": "wrong"}) as resp:
            assert resp.status == 401
        async with http.post(inbox.url + "/login", data={"token": TOKEN}, allow_redirects=False) as resp:
            assert resp.status == 303
            cookie = resp.cookies[COOKIE]
            raw = resp.headers.getall("Set-Cookie")[0]
        assert TOKEN not in cookie.value and hash_token(TOKEN) not in cookie.value
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and int(cookie["max-age"]) > 0
        assert "Secure" not in raw  # plain HTTP on 127.0.0.1: a Secure cookie would never come back
        async with http.get(inbox.url + "/") as resp:
            assert resp.status == 200 and "signed in as ben@example.com" in await resp.text()
    # Behind HTTPS (the trusted proxy says so): Secure.
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            inbox.url + "/login", data={"token": TOKEN}, headers={"X-Forwarded-Proto": "https"}, allow_redirects=False
        ) as resp,
    ):
        assert "Secure" in resp.headers.getall("Set-Cookie")[0]


def test_a_session_expires_and_cannot_be_forged() -> None:
    auth = InboxAuth(users={"ben@example.com": hash_token(TOKEN)})
    value = auth.session_for("ben@example.com", now=1000)
    assert auth.session_of(value, now=1001) == "ben@example.com"
    assert auth.session_of(value, now=1000 + auth.session_seconds) is None  # expired
    who, expires, mac = value.split(".")
    assert auth.session_of(f"{who}.{int(expires) + 10**6}.{mac}", now=1001) is None  # lengthened
    other = InboxAuth().session_for("ana@example.com", now=1000).split(".")[0]
    assert auth.session_of(f"{other}.{expires}.{mac}", now=1001) is None  # someone else
    assert auth.session_of(TOKEN) is None and auth.session_of("") is None


async def test_identities_the_inbox_cannot_believe_are_400s(client, inbox) -> None:
    async with aiohttp.ClientSession() as http:
        twice = [("X-Forwarded-Email", "mallory@example.com"), ("X-Forwarded-Email", "ana@example.com")]
        async with http.get(inbox.url + "/", headers=twice) as resp:
            assert resp.status == 400 and "comes 2 times" in await resp.text()
        for bad in ("ana smith", "<script>@x", "a" * 300, "ana\u202e@example.com"):
            async with http.get(inbox.url + "/", headers={"X-Forwarded-Email": bad}) as resp:
                assert resp.status == 400, bad
        async with http.get(inbox.url + "/", headers={"X-Forwarded-Email": "ana+ops@example.com"}) as resp:
            assert resp.status == 200 and "signed in as ana+ops@example.com" in await resp.text()


def test_proxy_ranges_every_address_refused_wide_ones_warned() -> None:
    for everyone in ("0.0.0.0/0", "::/0"):
        with pytest.raises(AuthConfigError, match="every address would be believed"):
            InboxAuth.build("X-Forwarded-Email", [everyone], None)
    _, warnings = proxy_networks(["10.0.0.0/8", "127.0.0.1", "10.1.2.0/24"])
    assert len(warnings) == 1 and "10.0.0.0/8" in warnings[0]
    assert InboxAuth.build("X-Forwarded-Email", ["10.0.0.0/8"], None).warnings


def test_a_short_links_secret_is_refused_when_the_config_loads() -> None:
    for short in ("x", "links-secret", "a" * 31):
        with pytest.raises(ValueError, match="at least 32 bytes"):
            NotifyConfig.model_validate({"links": {"secret": short}})
    NotifyConfig.model_validate({"links": {"secret": "s" * 32}})


def _request(event: str, **kw) -> NotifyRequest:
    asked = datetime(2026, 1, 1, tzinfo=UTC)
    return NotifyRequest(
        event=event,  # type: ignore[arg-type]
        execution_id="x",
        call_id="1",
        run_id="run-1",
        tool=kw.pop("tool", "send_money"),
        arguments={"to": "bob", "amount": 900},
        asked_at=asked,
        deadline=asked + timedelta(days=7),
        **kw,
    )


def test_every_link_lives_at_most_ttl_and_names_its_run_and_arguments() -> None:
    config = NotifyConfig.model_validate(
        {
            "inbox_url": "https://in.example",
            "links": {"secret": LINKS_SECRET, "ttl": "1h", "refuse": ["mcp:bank/*"]},
            "reminders": ["1d"],
        }
    )
    asked = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    for req, start in (
        (_request("approval.requested"), asked),
        (_request("approval.reminder", reminder=0), asked + 6 * 86400),  # a day before the 7-day deadline
    ):
        token = links_for(config, req, "ana@example.com")["approve"].rsplit("/", 1)[1]
        claim = read_link_token(LINKS_SECRET, token, now=start, ttl=3600)
        assert claim.expires - claim.issued <= 3600 and claim.issued == int(start)
        assert claim.run_id == "run-1" and claim.arguments_sha256
        with pytest.raises(LinkError, match="expired"):  # past its ttl (a reminder's too)
            read_link_token(LINKS_SECRET, token, now=start + 3601, ttl=3600)
    assert "approve" not in links_for(config, _request("approval.requested", tool="mcp:bank/pay"), "ana@example.com")
    # A link made to live longer than the inbox's ttl decides nothing.
    long = link("x", "1", expires_in=7200, run_id="run-1", arguments={"to": "bob", "amount": 900})
    with pytest.raises(LinkError, match="longer than links may"):
        read_link_token(LINKS_SECRET, long, ttl=3600)
    read_link_token(LINKS_SECRET, long, ttl=7200)
    # Signed under a key derived from the secret: a MAC with the secret itself does not pass.
    with pytest.raises(LinkError):
        read_link_token("another-secret-of-thirty-two-bytes!!", long)


async def test_a_link_for_a_tool_that_refuses_links_decides_nothing(client, task_queue, worker) -> None:
    from codemode.approvals.notify.config import Links
    from codemode.apps.inbox.serve import start_inbox
    from codemode.worker.dev_server import free_port

    auth = InboxAuth.build("X-Forwarded-Email", ["127.0.0.1"], None)
    links = Links(secret=LINKS_SECRET, refuse=["send_*"])
    running = await start_inbox(client, auth, port=free_port(), links_secret=links)
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=SEND), task_queue=task_queue)
        (pending,) = (await parked(handle)).pending_approvals
        good = link(handle.id, pending.call_id, run_id=pending.run_id, arguments=pending.arguments)
        async with aiohttp.ClientSession(headers={"X-Forwarded-Email": "carol@example.com"}) as http:
            async with http.post(f"{running.url}/link/{good}") as resp:
                assert resp.status == 403 and "decided in the inbox only" in await resp.text()
        assert (await parked(handle)).pending_approvals
        await handle.terminate("test over")
    finally:
        await running.stop()


def test_links_made_before_issue_45_decide_nothing() -> None:
    """A link token of the old shape (no run, no arguments, the raw secret as MAC key)."""
    import base64
    import hashlib
    import hmac
    import json

    payload = json.dumps(
        {"e": "x", "c": "1", "a": "approve", "by": "carol", "exp": int(time.time()) + 60, "n": "n"}
    ).encode()
    mac = hmac.new(LINKS_SECRET.encode(), payload, hashlib.sha256).digest()
    old = (
        base64.urlsafe_b64encode(payload).rstrip(b"=").decode()
        + "."
        + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    )
    with pytest.raises(LinkError):
        read_link_token(LINKS_SECRET, old)
