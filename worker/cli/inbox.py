"""``codemode inbox``: the approvals inbox, a web page where people decide waiting calls."""

from __future__ import annotations

import click

from codemode.worker.cli.common import EXIT_OK, Fail, address_option, note


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
@address_option
def inbox(
    host: str,
    port: int,
    trusted_header: str | None,
    trusted_proxies: tuple[str, ...],
    users_file: str | None,
    notify_config: str | None,
    address: str,
) -> int:
    """Serve the approvals inbox: every call waiting for approval, to approve, deny, edit then
    approve, or answer instead of the tool, as the signed-in person; until Ctrl-C."""
    import asyncio

    from codemode.activities.notify.config import NotifyConfigError, load_notify_config
    from codemode.worker.inbox.auth import AuthConfigError, InboxAuth

    try:
        auth = InboxAuth.build(trusted_header, list(trusted_proxies), users_file)
        config = load_notify_config(notify_config) if notify_config else None
    except (AuthConfigError, NotifyConfigError) as err:
        raise Fail(str(err)) from None
    secret = config.links.secret if config and config.links else None
    return asyncio.run(_serve(address, auth, host, port, secret))


async def _serve(address: str, auth: object, host: str, port: int, secret: str | None) -> int:
    from codemode.worker.cli.common import open_client
    from codemode.worker.cli.serve import until_stopped
    from codemode.worker.inbox.serve import start_inbox

    client = await open_client(address)
    try:
        running = await start_inbox(client, auth, host=host, port=port, links_secret=secret)  # type: ignore[arg-type]
    except OSError as err:
        raise Fail(f"cannot serve the inbox on {host}:{port}: {err.strerror or err}") from None
    note(f"Inbox ready on {running.url}")
    if running.login_url:
        note(f"Sign in as yourself with: {running.login_url}")
    try:
        await until_stopped()
    finally:
        await running.stop()
    return EXIT_OK
