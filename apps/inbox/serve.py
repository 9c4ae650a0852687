"""Serving the inbox: the aiohttp site on an address (127.0.0.1 by default), shared by
``codemode inbox`` and ``codemode dev``. With no way to sign in configured, a token is made for
the person who started it (``person``: the name they chose, else the OS user), and the login
link printed."""

from __future__ import annotations

import getpass
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web
from temporalio.client import Client

from codemode.approvals.notify.config import Links
from codemode.apps.inbox.app import Inbox
from codemode.apps.inbox.auth import InboxAuth, hash_token

if TYPE_CHECKING:
    from codemode.client.signing import Signer


@dataclass
class RunningInbox:
    url: str
    runner: web.AppRunner
    #: The sign-in page and the token to post there, when the inbox made its own token (nothing
    #: else configured). Never one link with the token in it: an address is kept in histories.
    login_url: str | None = None
    login_token: str | None = None

    async def stop(self) -> None:
        await self.runner.cleanup()


async def start_inbox(
    client: Client,
    auth: InboxAuth,
    *,
    host: str = "127.0.0.1",
    port: int = 8244,
    links_secret: Links | str | None = None,
    signer: Signer | None = None,
    person: str | None = None,
    printed_by: str = "codemode inbox",
) -> RunningInbox:
    """Serve the inbox; ``links_secret``: the notify config's ``links`` (or its secret alone);
    ``signer``: its service key, which signs on behalf of the person. Without a way to sign in,
    ``person`` (else the OS user) gets a token, whose link ``printed_by`` (the command) prints,
    as the sign-in page says."""
    made = hint = None
    if not auth.configured:
        made = secrets.token_urlsafe(24)
        auth.users = {person or getpass.getuser(): hash_token(made)}
        hint = (
            f"{printed_by} printed a sign-in link in its terminal when it started ({{url}}/login#token=…). Open "
            "that link, or paste what follows token= below to come back to this page."
        )
    shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
    url = f"http://{shown}:{port}"
    inbox = Inbox(client, auth, links_secret, signer, sign_in_hint=hint.format(url=url) if hint else None)
    runner = web.AppRunner(inbox.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    # The token rides after ``#``: a browser never sends it to a server (not in logs, not in a
    # Referer); the sign-in page's script posts it (without scripts: paste it).
    return RunningInbox(url=url, runner=runner, login_url=f"{url}/login#token={made}" if made else None, login_token=made)
