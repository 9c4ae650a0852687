"""``codemode keygen`` and ``codemode codec-server``: make an encryption key, and serve the
Temporal codec server protocol so the web UI and ``temporal --codec-endpoint`` decrypt.

``codemode server`` and ``codemode dev`` start the same codec server themselves when
``CODEMODE_ENCRYPTION_KEYS`` is set (``start_codec_server`` below, through ``common.start_server``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import click

from codemode.apps.cli.common import start_codec_server
from codemode.apps.command_line import EXIT_OK, Fail, note
from codemode.storage.encryption import KEY_ID_PATTERN, KEYS_ENV, EncryptionKeyError, Keyring, new_key
from codemode.worker.codec_server import DEFAULT_PORT, DEFAULT_UI_ORIGINS


def require_keys() -> Keyring:
    try:
        keys = Keyring.from_env()
    except EncryptionKeyError as err:
        raise Fail(str(err)) from None
    if keys is None:
        raise Fail(f"{KEYS_ENV} is not set: there is nothing to decrypt with (make a key with `codemode keygen`)")
    return keys


@click.command()
@click.argument("key_id", default="k1")
@click.option(
    "--approver",
    default=None,
    metavar="NAME",
    help="Instead: make NAME's Ed25519 key pair for signing decisions (the private key in the config "
    "directory, mode 0600); the last line printed is the public key for the approvers file.",
)
@click.option("--force", is_flag=True, help="With --approver: replace NAME's existing key.")
def keygen(key_id: str, approver: str | None, force: bool) -> int:
    """Print a new random AES-256 key as KEY_ID:BASE64 (for CODEMODE_ENCRYPTION_KEYS), or an approver's key pair."""
    if approver is not None:
        from codemode.approvals import keys

        try:
            path, public = keys.generate(approver, force=force)
        except keys.ApproverKeyError as err:
            raise Fail(str(err)) from None
        note(f"Private key of {approver}: {path} (keep it; `codemode approve ... --by {approver}` signs with it)")
        note(f'Add the public key to the approvers file: [people.{approver}] keys = ["{public}"]')
        click.echo(public)
        return EXIT_OK
    if not KEY_ID_PATTERN.fullmatch(key_id):
        raise Fail(f"key id {key_id!r} must be 1 to 64 letters, digits, '.', '_' or '-'")
    click.echo(f"{key_id}:{new_key()}")
    return EXIT_OK


@click.command("codec-server")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="Port to listen on.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on. Anyone who reaches it can decrypt: keep it on loopback, or use --token behind TLS.",
)
@click.option(
    "--token",
    envvar="CODEMODE_CODEC_TOKEN",
    show_envvar=True,
    default=None,
    help="Require `Authorization: Bearer TOKEN` (the temporal CLI: --codec-auth 'Bearer TOKEN').",
)
@click.option(
    "--ui-origin",
    "ui_origins",
    multiple=True,
    metavar="URL",
    help=f"Origin of a web UI allowed to call it (CORS; repeatable) [default: {', '.join(DEFAULT_UI_ORIGINS)}].",
)
@click.option(
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="NS",
    help="Serve only these namespaces (X-Namespace; repeatable).",
)
def codec_server(port: int, host: str, token: str | None, ui_origins: Sequence[str], namespaces: Sequence[str]) -> int:
    """Serve the Temporal codec server protocol (POST /encode, /decode, /download) with the keys
    in CODEMODE_ENCRYPTION_KEYS, until Ctrl-C."""
    require_keys()
    return asyncio.run(_codec_server(port, host, token, list(ui_origins) or list(DEFAULT_UI_ORIGINS), namespaces))


async def _codec_server(port: int, host: str, token: str | None, origins: list[str], namespaces: Sequence[str]) -> int:
    from codemode.apps.cli.serve import until_stopped
    from codemode.worker.codec_server import CodecSettings

    settings = CodecSettings(port=port, host=host, ui_origins=origins, token=token, namespaces=tuple(namespaces))
    server = await start_codec_server(settings, fallback=False)
    try:
        note(f"Codec server:    {server.url} (keys: {', '.join(require_keys().key_ids)})")
        note(f"Web UI origins:  {', '.join(origins)}")
        note(f"temporal CLI:    temporal --codec-endpoint {server.url} workflow show -w ID")
        note("Ready. Ctrl-C to stop.")
        await until_stopped()
    finally:
        await server.stop()
    return EXIT_OK
