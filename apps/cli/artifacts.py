"""``codemode artifacts ID [NAME]``: list the files an execution handed back, or fetch one.

The references come from the execution's outcome; the bytes from the object store (unsealed
with ``CODEMODE_ENCRYPTION_KEYS`` when they were sealed). Temporal and the layers below are
imported inside the command (``tests/cli/test_startup.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import TYPE_CHECKING, Any

import click

from codemode.apps.cli.common import json_option
from codemode.apps.command_line import connection_options

if TYPE_CHECKING:
    from codemode.worker.connection import Target


@click.command()
@click.argument("execution_id", metavar="ID")
@click.argument("name", required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True),
    default=None,
    help="Where to write the artifact NAME ('-': stdout) [default: its file name, in this directory].",
)
@json_option
@connection_options
def artifacts(execution_id: str, name: str | None, output: str | None, as_json: bool, target: Target) -> int:
    """List an execution's artifacts, or fetch the one called NAME."""
    return asyncio.run(_artifacts(execution_id, name, output, as_json, target))


async def _artifacts(execution_id: str, name: str | None, output: str | None, as_json: bool, target: Target) -> int:
    async with contextlib.AsyncExitStack() as stack:
        client = await _client(target, stack)
        return await _artifacts_of(client, execution_id, name, output, as_json)


async def _client(target: Target, stack: contextlib.AsyncExitStack) -> Any:
    """A client for ``target``. When nothing answers at a local address, the embedded server
    (its database holds what `codemode run` ran on it) starts for this command and stops with
    it: the README's `codemode run` then `codemode artifacts` works with no server left up."""
    from codemode.apps.cli.common import open_client, start_server
    from codemode.apps.command_line import note
    from codemode.worker.connection import local_target, server_answers, split_address

    if server_answers(target.address) or not target.may_embed:
        return await open_client(target, quick=True)
    server = await start_server(split_address(target.address)[1], None, None, namespace=target.namespace)
    stack.push_async_callback(server.stop)
    note(f"No Temporal server at {target.address}: started the embedded one to read the execution (db {server.db}).")
    return await open_client(local_target(server.address, target.namespace), quick=True)


async def _artifacts_of(client: Any, execution_id: str, name: str | None, output: str | None, as_json: bool) -> int:
    from codemode.apps.cli.common import existing_handle
    from codemode.apps.command_line import EXIT_OK, Fail

    handle, desc = await existing_handle(client, execution_id)
    from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

    if desc.status == WorkflowExecutionStatus.RUNNING:
        raise Fail(f"execution {execution_id} is still running: its artifacts are listed when it ends")
    try:
        outcome = await handle.result()
    except WorkflowFailureError as err:
        raise Fail(f"execution {execution_id} has no outcome ({type(err).__name__}: {err})", exit_code=1) from None
    if name is None:
        _list(outcome.artifacts, as_json)
        return EXIT_OK
    found = [a for a in outcome.artifacts if a.name == name]
    if not found:
        have = ", ".join(a.name for a in outcome.artifacts) or "none"
        raise Fail(f"execution {execution_id} has no artifact {name!r} (it has: {have})")
    data = await _load(client, execution_id, found[0])
    _write(data, output or name.rpartition("/")[2], found[0].name)
    return EXIT_OK


def _list(items: list[Any], as_json: bool) -> None:
    if as_json:
        import json

        click.echo(json.dumps({"artifacts": [a.model_dump(mode="json") for a in items]}))
        return
    if not items:
        click.echo("no artifacts")
        return
    from codemode.activities.models import human_bytes

    width = max(len(a.name) for a in items)
    for a in items:
        click.echo(f"{a.name:<{width}}  {human_bytes(a.size):>8}  {a.mime_type:<24}  sha256:{a.sha256[:16]}")


async def _load(client: Any, execution_id: str, artifact: Any) -> bytes:
    from codemode.activities.checkpoints import CheckpointUnusable
    from codemode.apps.command_line import Fail
    from codemode.client.artifacts import read_artifact

    try:
        return await read_artifact(client, execution_id, artifact)
    except CheckpointUnusable as err:
        raise Fail(str(err), exit_code=1) from None


def _write(data: bytes, output: str, name: str) -> None:
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with open(output, "wb") as f:
        f.write(data)
    click.echo(f"wrote {name} to {output} ({len(data)} bytes)", err=True)
