"""A webhook receiver (aiohttp) that verifies signatures and can be down, and an SMTP server
(aiosmtpd) that keeps what it is sent: the far ends of the notify channels, for real."""

from __future__ import annotations

import asyncio
import email
import json
import ssl
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult

from codemode.approvals.notify.signing import SIGNATURE_HEADER, verify_webhook


@dataclass
class Receiver:
    secret: str
    port: int
    #: Every request that came in: (idempotency key, verified, body).
    seen: list[tuple[str, bool, dict[str, Any]]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    async def _hook(self, request: web.Request) -> web.Response:
        raw = await request.read()
        ok = verify_webhook(self.secret, raw, request.headers.get(SIGNATURE_HEADER, ""))
        self.seen.append((request.headers.get("Idempotency-Key", ""), ok, json.loads(raw)))
        self.arrived.set()
        return web.Response(status=200 if ok else 401)

    async def up(self) -> None:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def down(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def events(self) -> list[str]:
        return [body.get("event", body.get("text", "")) for _, _, body in self.seen]

    async def wait_for_text(self, text: str, timeout: float = 60) -> dict[str, Any]:
        """A Slack-format message whose text is ``text``."""

        async def look() -> dict[str, Any]:
            while True:
                for _, _, body in self.seen:
                    if body.get("text") == text:
                        return body
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(look(), timeout)

    async def wait_for(self, event: str, timeout: float = 60) -> dict[str, Any]:
        async def look() -> dict[str, Any]:
            while True:
                for _, _, body in self.seen:
                    if body.get("event") == event:
                        return body
                self.arrived.clear()
                await self.arrived.wait()

        return await asyncio.wait_for(look(), timeout)


class Mailbox:
    """``async def handle_DATA``: aiosmtpd's handler interface."""

    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []
        self.logins: list[str] = []

    def authenticator(self, users: dict[str, str]) -> Any:
        def check(server: Any, session: Any, envelope: Any, mechanism: str, auth_data: Any) -> AuthResult:
            name, password = auth_data.login.decode(), auth_data.password.decode()
            if users.get(name) != password:
                return AuthResult(success=False, handled=False)
            self.logins.append(name)
            return AuthResult(success=True)

        return check

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"

    async def wait_for(self, count: int, timeout: float = 60) -> None:
        """Until ``count`` messages have come (aiosmtpd's thread appends them)."""
        for _ in range(int(timeout * 10)):
            if len(self.messages) >= count:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{len(self.messages)} message(s) after {timeout} s, not {count}")


def smtp_server(
    port: int, *, tls: ssl.SSLContext | None = None, users: dict[str, str] | None = None
) -> tuple[Controller, Mailbox]:
    """An SMTP server on ``port``; with ``tls``, STARTTLS is required before anything, and with
    ``users`` (name: password) a login too (only over TLS). ``Mailbox.logins`` keeps who."""
    box = Mailbox()
    secured: dict[str, Any] = {}
    if tls is not None:
        secured = {"tls_context": tls, "require_starttls": True}
    if users is not None:
        secured |= {"authenticator": box.authenticator(users), "auth_required": True, "auth_require_tls": True}
    controller = Controller(box, hostname="127.0.0.1", port=port, **secured)
    controller.start()
    return controller, box
