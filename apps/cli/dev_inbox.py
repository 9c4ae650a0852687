"""``codemode dev``'s approvals inbox, and what makes it the way to a waiting call: the worker
``dev`` runs names the inbox's page of each call (in the run's memo and details, in ``codemode
run``'s parked message, in notifications), its notifications carry approve/deny links this
inbox honours, and its console says when a call waits and when it is decided.

When the notify config names no ``inbox_url``, ``dev`` supplies its own (and a links secret
when the config has none); a webhook that names no ``approver`` gets links naming the person
``dev`` signs in, who chose their name with ``--user`` (else ``CODEMODE_USER``, else the OS
user)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from codemode.apps.command_line import Fail, note

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.approvals.notify.config import NotifyConfig

user_option = click.option(
    "--user",
    "person",
    envvar="CODEMODE_USER",
    show_envvar=True,
    default=None,
    metavar="NAME",
    help="Who you are, when no users file or sign-in proxy says: the inbox signs you in as NAME (the name "
    "you give `codemode approve --by`), and dev's notification links name you [default: the OS user].",
)


def who(person: str | None) -> tuple[str, bool]:
    """(the person dev signs in, whether they chose the name)."""
    if person and person.strip():
        return person.strip(), True
    from codemode.client.requests import starter

    return starter(), False


def dev_notify(config: NotifyConfig | None, inbox_url: str, person: str) -> NotifyConfig:
    """The notify config the dev worker runs with: the file's, completed with this inbox."""
    from codemode.approvals.notify.config import Links, NotifyConfig

    config = config or NotifyConfig()
    if config.inbox_url:  # another inbox: its links are that inbox's business
        return config
    links = config.links or Links(secret=secrets.token_urlsafe(32))
    hooks = [h if h.approver else h.model_copy(update={"approver": person}) for h in config.webhooks]
    return config.model_copy(update={"inbox_url": inbox_url, "links": links, "webhooks": hooks})


@dataclass
class DevInbox:
    running: Any
    watch: asyncio.Task[None]

    async def stop(self) -> None:
        self.watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.watch
        await self.running.stop()


async def start_dev_inbox(client: Client, port: int, person: str, chosen: bool, config: NotifyConfig) -> DevInbox:
    """The inbox on 127.0.0.1, signed in through the printed link; and the console's watch."""
    import os

    from codemode.apps.inbox import SIGNING_KEY_ENV, InboxAuth, inbox_signer, start_inbox, watch_calls

    secret = config.links if config.links else None  # the Links (secret, ttl), as `codemode inbox`
    signer = inbox_signer(os.environ.get(SIGNING_KEY_ENV))  # checked by use_inbox_key
    try:
        running = await start_inbox(
            client, InboxAuth(), port=port, links_secret=secret, signer=signer, person=person, printed_by="codemode dev"
        )
    except OSError as err:
        why = err.strerror or err
        raise Fail(f"cannot serve the inbox on port {port}: {why} (choose another with --inbox-port)") from None
    note(f"Approvals inbox: {running.login_url or running.url}")
    if running.login_url:
        choose = "" if chosen else " (choose your name with --user NAME or CODEMODE_USER)"
        note(f"  (that link signs you in as {person}{choose})")
    if running.login_token:
        note(f"Sign in with the token {running.login_token}")
    return DevInbox(running, asyncio.create_task(watch_calls(client, running.url, note)))
