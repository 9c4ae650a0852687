"""What the CLI's command groups share beyond ``apps/command_line.py`` (exit codes, ``Fail``,
the options ``codemode mcp`` takes too): the CLI's own options, and helpers that reach the
server (connect, find an execution, start the embedded server) with usage errors.

Every command imports this module, ``codemode --help`` and ``codemode approve --help``
included: it imports click and the standard library only. The helpers import Temporal,
pydantic and the layers below when they run."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from codemode.apps.command_line import Fail, note, usage_errors

if TYPE_CHECKING:
    from pydantic import BaseModel
    from temporalio.client import Client, WorkflowHandle

    from codemode.storage import BlobStore
    from codemode.storage.encryption import Keyring
    from codemode.worker.codec_server import CodecServer, CodecSettings
    from codemode.worker.connection import Target
    from codemode.worker.dev_server import EmbeddedServer

#: The codec server's port (``codemode.worker.codec_server.DEFAULT_PORT``; a test keeps them equal).
DEFAULT_CODEC_PORT = 8081


def emit(model: BaseModel, lines: list[str], *, as_json: bool) -> None:
    """A model as one JSON object, or its human lines, on stdout."""
    click.echo(model.model_dump_json() if as_json else "\n".join(lines))


# -- options of the CLI's own commands --------------------------------------------------------------

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
port_option = click.option("--port", type=int, default=7233, show_default=True, help="gRPC port of the server.")
ui_port_option = click.option("--ui-port", type=int, default=None, help="Web UI port [default: port + 1000].")


# -- helpers ------------------------------------------------------------------------------------


async def open_client(target: Target, *, quick: bool = False, **options: Any) -> Client:
    """A client for the command's resolved connection settings (``client.backend.connect_to``;
    ``options`` go to ``Client.connect``, e.g. ``runtime``; ``quick``: a command that asks or
    decides and exits). A refusal (a credential, a certificate, a namespace) is one line
    naming the address, the namespace and the credential used."""
    from codemode.client.backend import NoServerAnswers, connect_to

    with usage_errors():
        try:
            return await connect_to(target, quick=quick, **options)
        except NoServerAnswers:
            raise Fail(
                f"no Temporal server answers at {target.describe()}; start one with `codemode server` "
                "(or `codemode dev --tools MODULE`), or point --address / --profile (TEMPORAL_ADDRESS, "
                "TEMPORAL_PROFILE) at yours"
            ) from None


async def open_store() -> BlobStore:
    """The object store the environment configures (payloads and checkpoints live there)."""
    from codemode.client.backend import open_store

    with usage_errors():
        return await open_store()


async def existing_handle(client: Client, execution_id: str) -> tuple[WorkflowHandle[Any, Any], Any]:
    """The execution's handle and its description; a usage error when the server has none."""
    from temporalio.service import RPCError, RPCStatusCode

    from codemode.workflows.models import ExecutionOutcome

    handle = client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)
    try:
        return handle, await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Fail(f"no execution {execution_id!r} at {client.service_client.config.target_host}") from None
        raise


@dataclass
class Found:
    """The execution a person means by an ID (see ``find_execution``)."""

    #: The execution acted on: the ID itself, or the running cell of the session it names.
    execution_id: str
    #: Its handle and description; None for a session that runs no cell now.
    handle: WorkflowHandle[Any, Any] | None
    description: Any
    #: The session the ID named, if it named one.
    session: str | None = None


async def find_execution(client: Client, execution_id: str) -> Found:
    """The execution ``execution_id`` means. A session's id (``session:NAME``, or a bare NAME
    that no execution has) means the session's running cell: that is the execution that waits
    for a person's decision, and the one a person finds under the agent's workflow in the UI
    is the session. Read from the server's description of the session (no worker needed)."""
    from codemode.activities.records import SESSION_WORKFLOW_TYPE

    try:
        handle, desc = await existing_handle(client, execution_id)
    except Fail as missing:
        from codemode.workflows.models import SESSION_NAME

        if not SESSION_NAME.fullmatch(execution_id):
            raise
        try:  # a bare session name
            handle, desc = await existing_handle(client, f"session:{execution_id}")
        except Fail:
            raise missing from None
        if desc.workflow_type != SESSION_WORKFLOW_TYPE:
            raise missing from None
    if desc.workflow_type != SESSION_WORKFLOW_TYPE:  # (the sessions' module only when it is one)
        return Found(execution_id, handle, desc)
    from codemode.client.sessions import running_cell, session_named

    session = session_named(desc.id)
    if session is None:
        return Found(execution_id, handle, desc)
    cell = running_cell(desc)
    if cell is None:
        return Found(desc.id, None, desc, session)
    note(f"session {session}: its running cell is {cell}")
    cell_handle, cell_desc = await existing_handle(client, cell)
    return Found(cell, cell_handle, cell_desc, session)


def os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def interactive_terminal() -> bool:
    return sys.stdin.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


codec_port_option = click.option(
    "--codec-port",
    type=int,
    default=DEFAULT_CODEC_PORT,
    show_default=True,
    envvar="CODEMODE_CODEC_PORT",
    show_envvar=True,
    help="With CODEMODE_ENCRYPTION_KEYS set: port of the codec server started for the web UI (a free one if taken).",
)


def encryption_keys() -> Keyring | None:
    """The keyring ``CODEMODE_ENCRYPTION_KEYS`` configures (a bad value is a usage error)."""
    from codemode.storage.encryption import Keyring

    with usage_errors():
        return Keyring.from_env()


async def start_server(
    port: int, ui_port: int | None, db: str | None, codec_port: int = DEFAULT_CODEC_PORT, *, namespace: str | None = None
) -> EmbeddedServer:
    """The embedded server (with a codec server for its web UI when encryption keys are set)."""
    from codemode.client.backend import start_embedded

    with usage_errors():
        return await start_embedded(port, ui_port, db, codec_port, namespace=namespace, note=note)


async def start_codec_server(settings: CodecSettings, *, fallback: bool = True) -> CodecServer:
    """A running codec server over this process's data converter (see ``serve_codec``)."""
    from codemode.worker.codec_server import serve_codec

    store = await open_store()
    try:
        return await serve_codec(store, settings, fallback=fallback, notify=note)
    except OSError as err:
        where = f"{settings.host}:{settings.port}"
        raise Fail(f"cannot serve the codec server on {where}: {err.strerror or err}") from None
