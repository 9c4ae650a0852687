"""Serving the inbox: the aiohttp site on an address (127.0.0.1 by default), shared by
``codemode inbox`` and ``codemode dev``. With no way to sign in configured, a token is made for
the person who started it, and the login link printed."""

from __future__ import annotations

import getpass
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from temporalio.client import Client

from codemode.apps.inbox.app import Inbox
from codemode.apps.inbox.auth import InboxAuth, hash_token

if TYPE_CHECKING:
    from codemode.client.signing import Signer


@dataclass
class RunningInbox:
    url: str
    runner: web.AppRunner
    #: The login link when the inbox made its own token (nothing else configured).
    login_url: str | None = None

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_inbox(
    client: Client,
    auth: InboxAuth,
    *,
    host: str = "127.0.0.1",
    port: int = 8244,
    links_secret: str | None = None,
    signer: Signer | None = None,
) -> RunningInbox:
    """Serve the inbox; ``signer``: its service key, which signs on behalf of the person."""
    made = None
    if not auth.configured:
        made = secrets.token_urlsafe(24)
        auth.users = {getpass.getuser(): hash_token(made)}
    runner = web.AppRunner(Inbox(client, auth, links_secret, signer).app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    url = f"http://{shown}:{port}"
    return RunningInbox(url=url, runner=runner, login_url=f"{url}/login?token={made}" if made else None)
