"""``codemode save ID --name NAME`` and ``codemode snippets list|show|remove|grant|revoke``:
saved snippets (issue 48), a run that worked as a named, typed, versioned function.

A person promotes (``save``), names who they are (``--by``, their keygen key or ``--key``; with
``CODEMODE_APPROVERS`` set, an approvers file is in use and the promotion must be signed) and
may edit the parameters' schema and the docstring. The library is read from the object store
directly (no server needed for ``snippets``); ``save`` reads the run's history."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from codemode.apps.cli.common import json_option, open_client, os_user
from codemode.apps.command_line import EXIT_OK, Duration, Fail, connection_options, note

if TYPE_CHECKING:
    from codemode.activities.snippets.library import SnippetLibrary
    from codemode.worker.connection import Target

_by = click.option("--by", default=None, help="Who you are (a name in the approvers file) [default: your OS user].")
_key = click.option("--key", "key_file", default=None, help="Sign with this private key file [default: --by's keygen key].")


def _split(ref: str) -> tuple[str, str | None]:
    """``NAME`` or ``NAME@VERSION``."""
    name, _, version = ref.partition("@")
    return name, version or None


def _signer(by: str, key_file: str | None) -> Any:
    from codemode.approvals.keys import ApproverKeyError
    from codemode.client.signing import own_signer

    try:
        return own_signer(by, key_file)
    except ApproverKeyError as err:
        raise Fail(str(err)) from None


async def _library(target: Target) -> SnippetLibrary:
    from codemode.activities.snippets.library import SnippetLibrary
    from codemode.storage.encryption import Keyring
    from codemode.worker.converter import default_store

    return SnippetLibrary(await default_store(), target.namespace, keys=Keyring.from_env())


def _snippet_errors() -> Any:
    import contextlib

    from codemode.activities.snippets.models import SnippetError

    @contextlib.contextmanager
    def mapped() -> Any:
        try:
            yield
        except SnippetError as err:
            raise Fail(str(err)) from None

    return mapped()


# -- save ---------------------------------------------------------------------------------------


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option("--name", required=True, help="The snippet's name: the code calls it as snippets.NAME(...).")
@click.option("--description", default=None, help="Its docstring [default: the code's leading comment lines].")
@click.option(
    "--schema",
    "schema_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Its parameters as a JSON schema object (the run's inputs, edited) [default: their JSON types].",
)
@_by
@_key
@json_option
@connection_options
def save(
    execution_id: str,
    name: str,
    description: str | None,
    schema_file: str | None,
    by: str | None,
    key_file: str | None,
    as_json: bool,
    target: Target,
) -> int:
    """Save a completed execution as a snippet: its code, its inputs as typed parameters."""
    import asyncio
    import json
    import os

    schema = json.loads(open(schema_file).read()) if schema_file else None
    person = by or os_user()
    signer = _signer(person, key_file)
    required = bool(os.environ.get("CODEMODE_APPROVERS"))
    if required and signer is None:
        raise Fail(
            f"an approvers file is in use (CODEMODE_APPROVERS): sign the promotion with {person}'s key "
            f"(`codemode keygen --approver {person}`, or --key FILE)"
        )
    return asyncio.run(_save(execution_id, name, description, schema, person, signer, as_json, target))


async def _save(
    execution_id: str,
    name: str,
    description: str | None,
    schema: dict[str, Any] | None,
    by: str,
    signer: Any,
    as_json: bool,
    target: Target,
) -> int:
    from codemode.client.snippets import promote

    client = await open_client(target, quick=True)
    with _snippet_errors():
        saved, new = await promote(client, execution_id, name, description=description, parameters=schema, by=by, signer=signer)
    if as_json:
        click.echo(saved.model_dump_json())
        return EXIT_OK
    if new:
        signed = f", signed by {saved.provenance.signature.signer}" if saved.provenance.signature else " (unsigned)"
        click.echo(f"✓ saved {saved.ref} from {execution_id}{signed}")
    else:
        click.echo(f"already saved as {saved.ref} (promoted by {saved.provenance.promoted_by})")
    click.echo(f"  call it: {_call_line(saved)}")
    return EXIT_OK


def _call_line(saved: Any) -> str:
    from codemode.activities.snippets.models import is_async_code

    params = ", ".join(f"{p}=..." for p in (saved.snippet.parameters.get("properties") or {}))
    text = f"snippets.{saved.name}({params})"
    return f"await {text}" if is_async_code(saved.snippet.code) else text


# -- snippets -----------------------------------------------------------------------------------


@click.group()
def snippets() -> None:
    """Saved snippets: list, show, remove them; grant (or revoke) the pre-approval of their calls."""


@snippets.command("list")
@click.option("--versions", "all_versions", is_flag=True, help="Every version, not only the newest of each.")
@json_option
@connection_options
def list_command(all_versions: bool, as_json: bool, target: Target) -> int:
    """The saved snippets, by name: newest version, promoted by whom, when."""
    import asyncio

    return asyncio.run(_list(all_versions, as_json, target))


async def _list(all_versions: bool, as_json: bool, target: Target) -> int:
    library = await _library(target)
    with _snippet_errors():
        found = []
        for name in await library.names():
            versions = await library.versions(name)
            found.extend(versions if all_versions else versions[-1:])
    if as_json:
        import json

        click.echo(json.dumps([s.model_dump(mode="json") for s in found]))
        return EXIT_OK
    if not found:
        note("No saved snippets.")
    for s in found:
        first = (s.snippet.description.strip().splitlines() or [""])[0]
        p = s.provenance
        click.echo(f"{s.ref}\t{p.promoted_by}\t{p.promoted_at:%Y-%m-%d %H:%M}\t{first}")
    return EXIT_OK


@snippets.command("show")
@click.argument("ref", metavar="NAME[@VERSION]")
@json_option
@connection_options
def show(ref: str, as_json: bool, target: Target) -> int:
    """One snippet: its stub, parameters, tools, provenance, grants and code."""
    import asyncio

    return asyncio.run(_show(ref, as_json, target))


async def _show(ref: str, as_json: bool, target: Target) -> int:
    name, version = _split(ref)
    library = await _library(target)
    with _snippet_errors():
        saved = await library.find(name, version)
        versions = await library.versions(name)
        grants = await library.grants(name, saved.version)
    if as_json:
        import json

        data = saved.model_dump(mode="json")
        data["grants"] = [g.model_dump(mode="json") for g in grants]
        click.echo(json.dumps(data))
        return EXIT_OK
    p = saved.provenance
    signed = f"signed by {p.signature.signer}" if p.signature else "unsigned"
    lines = [
        f"{saved.ref}  (version {saved.version})",
        f"promoted by {p.promoted_by} at {p.promoted_at:%Y-%m-%d %H:%M:%S} UTC from {p.source_execution} ({signed})",
        f"saved from a {saved.snippet.runtime} run; {len(versions)} version(s): "
        + ", ".join(v.version[:12] for v in versions),
        "",
        saved.snippet.signature(saved.version).stub(),
        "",
        "tools it calls (signature hash when saved):",
        *[f"  {t}  {h}" for t, h in saved.snippet.tools.items()],
        "grants:" if grants else "grants: none",
        *[
            f"  {g.grant_id}  by {g.signer}  tools {', '.join(g.tools)}"
            + (f"  until {g.expires_at:%Y-%m-%d %H:%M} UTC" if g.expires_at else "")
            + (f"  ({g.note})" if g.note else "")
            for g in grants
        ],
        "",
        "code:",
        *[f"  {line}" for line in saved.snippet.code.splitlines()],
    ]
    click.echo("\n".join(lines))
    return EXIT_OK


@snippets.command("remove")
@click.argument("ref", metavar="NAME[@VERSION]")
@connection_options
def remove(ref: str, target: Target) -> int:
    """Delete a snippet (every version), or one version of it: runs no longer find it."""
    import asyncio

    return asyncio.run(_remove(ref, target))


async def _remove(ref: str, target: Target) -> int:
    name, version = _split(ref)
    library = await _library(target)
    with _snippet_errors():
        if version is None and not await library.versions(name):
            await library.find(name)  # says what is saved
        deleted = await library.remove(name, version)
    click.echo(f"✓ removed {name}: {len(deleted)} version(s) ({', '.join(v[:12] for v in deleted)})")
    return EXIT_OK


@snippets.command("grant")
@click.argument("ref", metavar="NAME[@VERSION]")
@click.option("--tool", "tools", multiple=True, help="A tool whose calls it approves (repeatable) [default: all it calls].")
@click.option("--expires", type=Duration(), default=None, help="How long it counts: 90m, 12h, 30d [default: until revoked].")
@click.option("--note", default="", help="Why, for the audit.")
@_by
@_key
@connection_options
def grant(
    ref: str, tools: tuple[str, ...], expires: timedelta | None, note: str, by: str | None, key_file: str | None, target: Target
) -> int:
    """Pre-approve one version's calls: signed over its hash and parameter schema, never by name."""
    import asyncio

    person = by or os_user()
    signer = _signer(person, key_file)
    if signer is None:
        raise Fail(f"a grant is signed: {person} has no key (`codemode keygen --approver {person}`, or --key FILE)")
    return asyncio.run(_grant(ref, list(tools) or None, expires, note, signer, target))


async def _grant(ref: str, tools: list[str] | None, expires_in: timedelta | None, note: str, signer: Any, target: Target) -> int:
    from codemode.client.snippets import grant as sign_and_keep

    name, version = _split(ref)
    client = await open_client(target, quick=True)
    with _snippet_errors():
        signed = await sign_and_keep(client, name, signer, version=version, tools=tools, expires_in=expires_in, note=note)
    click.echo(
        f"✓ grant {signed.grant_id}: {signer.name} pre-approves {', '.join(signed.tools)} in "
        f"{name}@{signed.version[:12]} (a worker counts it when its approvers file lets {signer.name} decide them)"
    )
    return EXIT_OK


@snippets.command("revoke")
@click.argument("name")
@click.argument("grant_id")
@connection_options
def revoke(name: str, grant_id: str, target: Target) -> int:
    """Withdraw a grant: calls that ask from now on wait for a person again."""
    import asyncio

    async def go() -> int:
        library = await _library(target)
        with _snippet_errors():
            if not await library.revoke(name, grant_id):
                raise Fail(f"no grant {grant_id} of {name}")
        click.echo(f"✓ revoked grant {grant_id} of {name}")
        return EXIT_OK

    return asyncio.run(go())
