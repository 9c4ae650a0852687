"""``codemode inbox``: the approvals inbox, a web page where people decide waiting calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from codemode.apps.command_line import EXIT_OK, Fail, connection_options, note

if TYPE_CHECKING:
    from codemode.worker.connection import Target


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8244, show_default=True, type=int, help="Port to listen on.")
@click.option(
    "--trusted-header",
    default=None,
    metavar="NAME",
    help="Take the person's identity from this header (e.g. X-Forwarded-Email from oauth2-proxy), "
    "only on requests from --trusted-proxy addresses.",
)
@click.option(
    "--trusted-proxy", "trusted_proxies", multiple=True, metavar="ADDR", help="An address or network of the proxy."
)
@click.option(
    "--users",
    "users_file",
    default=None,
    metavar="FILE",
    help='Users and their hashed tokens: {"users": {"ana@example.com": "sha256:<hex>"}} (JSON or TOML).',
)
@click.option(
    "--notify-config",
    "notify_config",
    envvar="CODEMODE_NOTIFY_CONFIG",
    show_envvar=True,
    metavar="FILE",
    help="The workers' notify config: its links secret lets the approve/deny links in notifications decide.",
)
@click.option(
    "--signing-key",
    "signing_key",
    envvar="CODEMODE_INBOX_SIGNING_KEY",
    show_envvar=True,
    default=None,
    metavar="FILE",
    help="The inbox's private key (`codemode keygen --approver inbox`): it signs every decision on behalf of "
    "the signed-in person, as a worker with an approvers file requires (list the inbox there with signs_for).",
)
@click.option(
    "--signer",
    "signer_name",
    envvar="CODEMODE_INBOX_SIGNER",
    show_envvar=True,
    default="inbox",
    show_default=True,
    metavar="NAME",
    help="The inbox's name in the approvers file (with --signing-key).",
)
@connection_options
def inbox(
    host: str,
    port: int,
    trusted_header: str | None,
    trusted_proxies: tuple[str, ...],
    users_file: str | None,
    notify_config: str | None,
    signing_key: str | None,
    signer_name: str,
    target: Target,
) -> int:
    """Serve the approvals inbox: every call waiting for approval, to approve, deny, edit then
    approve, or answer instead of the tool, as the signed-in person; until Ctrl-C."""
    import asyncio

    from codemode.approvals.keys import ApproverKeyError
    from codemode.approvals.notify.config import NotifyConfigError, load_notify_config
    from codemode.apps.inbox import AuthConfigError, InboxAuth, inbox_signer

    try:
        auth = InboxAuth.build(trusted_header, list(trusted_proxies), users_file)
        config = load_notify_config(notify_config) if notify_config else None
        signer = inbox_signer(signing_key, signer_name)
    except (AuthConfigError, NotifyConfigError, ApproverKeyError) as err:
        raise Fail(str(err)) from None
    secret = config.links.secret if config and config.links else None
    return asyncio.run(_serve(target, auth, host, port, secret, signer))


async def _serve(target: Target, auth: object, host: str, port: int, secret: str | None, signer: object = None) -> int:
    from codemode.apps.cli.common import open_client
    from codemode.apps.cli.serve import until_stopped
    from codemode.apps.inbox import start_inbox

    client = await open_client(target)
    try:
        running = await start_inbox(
            client,
            auth,  # type: ignore[arg-type]
            host=host,
            port=port,
            links_secret=secret,
            signer=signer,  # type: ignore[arg-type]
        )
    except OSError as err:
        raise Fail(f"cannot serve the inbox on {host}:{port}: {err.strerror or err}") from None
    note(f"Inbox ready on {running.url}")
    if signer is not None:
        note(f"Decisions are signed as {signer.name} on behalf of the signed-in person")  # type: ignore[attr-defined]
    if running.login_url:
        note(f"Sign in as yourself with: {running.login_url}")
    try:
        await until_stopped()
    finally:
        await running.stop()
    return EXIT_OK
