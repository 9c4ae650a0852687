"""What every command group shares: exit codes, ``Fail``, the common options, and helpers that
reach the server (connect, find an execution, ask it for its status) or load a tools module.

Every command imports this module, ``codemode --help`` and ``codemode approve --help``
included: it imports click and the standard library only. The helpers import Temporal,
pydantic and the layers below when they run."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from codemode.apps.cli.connection_options import command_target, connection_options, printed_flags

if TYPE_CHECKING:
    from pydantic import BaseModel
    from temporalio.client import Client, WorkflowHandle

    from codemode.activities.cli_tools import CliConfig
    from codemode.activities.mcp_tools import McpConfig, McpServers
    from codemode.activities.tools import ToolRegistry
    from codemode.storage import BlobStore
    from codemode.storage.encryption import Keyring
    from codemode.worker.codec_server import CodecServer
    from codemode.worker.dev_server import EmbeddedServer

#: The task queue workers poll unless told otherwise (``codemode.workflows.models.TASK_QUEUE``;
#: a test keeps them equal, so that ``--help`` need not import the workflow's models).
TASK_QUEUE = "codemode"
#: The codec server's port (``codemode.worker.codec_server.DEFAULT_PORT``; a test keeps them equal).
DEFAULT_CODEC_PORT = 8081

EXIT_OK, EXIT_CODE_ERROR, EXIT_USAGE, EXIT_AWAITING_APPROVAL = 0, 1, 2, 3


class Fail(click.ClickException):
    """A clean failure with a message and an exit code (2 unless said otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def note(message: str) -> None:
    click.echo(message, err=True)


def emit(model: BaseModel, lines: list[str], *, as_json: bool) -> None:
    """A model as one JSON object, or its human lines, on stdout."""
    click.echo(model.model_dump_json() if as_json else "\n".join(lines))


# -- options shared by commands ----------------------------------------------------------------

#: Temporal's connection flags (``--address``, ``--namespace``, ``--api-key``, ``--tls*``,
#: ``--profile``, ``--config-file``) on a command with an ``address: str`` parameter.
address_option = connection_options
task_queue_option = click.option(
    "--task-queue",
    envvar="CODEMODE_TASK_QUEUE",
    default=TASK_QUEUE,
    show_default=True,
    show_envvar=True,
    help="Task queue the workers poll.",
)
tools_option = click.option("--tools", "tools_module", metavar="MODULE", help="Tools module (importable from here).")
mcp_config_option = click.option(
    "--mcp-config",
    "mcp_config",
    metavar="FILE",
    envvar="CODEMODE_MCP_CONFIG",
    show_envvar=True,
    help='MCP servers whose tools the code may call (the {"mcpServers": ...} JSON of MCP clients).',
)
cli_config_option = click.option(
    "--cli-config",
    "cli_config",
    metavar="FILE",
    envvar="CODEMODE_CLI_CONFIG",
    show_envvar=True,
    help='Command-line tools the code may run (a {"cliTools": ...} JSON or TOML file).',
)
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
port_option = click.option("--port", type=int, default=7233, show_default=True, help="gRPC port of the server.")
ui_port_option = click.option("--ui-port", type=int, default=None, help="Web UI port [default: port + 1000].")


class Size(click.ParamType):
    """A number of bytes: ``1048576``, or with a binary suffix ``512K``, ``256M``, ``1.5G`` (also ``MB``, ``MiB``)."""

    name = "SIZE"
    _PATTERN = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
    _POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        m = self._PATTERN.fullmatch(str(value).strip())
        if not m:
            self.fail(f"{value!r} is not a size: give bytes, or a number with K, M, G or T (e.g. 256M, 1G)", param, ctx)
        size = int(float(m.group(1)) * 1024 ** self._POWERS[m.group(2).lower()])
        if size <= 0:
            self.fail(f"{value!r}: the size must be more than 0 bytes", param, ctx)
        return size


class Count(click.IntRange):
    """A whole number, 0 or more."""

    name = "whole number"

    def __init__(self) -> None:
        super().__init__(min=0)


class Duration(click.ParamType):
    """A length of time: seconds (``90``), or numbers with units ms, s, m, h, d (``30m``, ``1h30m``, ``7d``)."""

    name = "DURATION"

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    _PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)", re.IGNORECASE)
    _SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        text = str(value).strip().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            parts = self._PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                self.fail(f"{value!r} is not a duration: give seconds, or e.g. 90s, 30m, 2h, 7d, 1h30m", param, ctx)
            seconds = sum(float(n) * self._SECONDS[u.lower()] for n, u in parts)
        if not (seconds > 0 or (self.allow_zero and seconds == 0)):  # also refuses nan
            self.fail(f"{value!r}: the duration must be more than 0", param, ctx)
        try:
            return timedelta(seconds=seconds)
        except OverflowError:
            self.fail(f"{value!r} is too long", param, ctx)


def printed_address_flag(ctx: click.Context) -> str:
    """The connection flags typed on the command line (`` --address X --namespace N``, never
    the API key), so printed commands are exact."""
    return printed_flags(ctx)


# -- helpers ------------------------------------------------------------------------------------


def load_tools(module: str) -> ToolRegistry:
    """Import a tools module from the current directory (a dotted name or a ``.py`` path)."""
    from codemode.activities.tools import ToolRegistry

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    name = module[:-3].replace(os.sep, ".").strip(".") if module.endswith(".py") else module
    try:
        return ToolRegistry.from_module(name)
    except ModuleNotFoundError as err:
        raise Fail(f"cannot import tools module {module!r}: {err} (run from the folder that contains it)") from None
    except ValueError as err:
        raise Fail(f"tools module {module!r}: {err}") from None
    except Exception as err:
        raise Fail(f"importing tools module {module!r} failed: {type(err).__name__}: {err}") from None


def require_tools(tools_module: str | None, mcp_config: str | None = None, cli_config: str | None = None) -> str | None:
    if not tools_module and not mcp_config and not cli_config:
        raise Fail(
            "missing --tools MODULE (the module whose public functions are the tools), "
            "--mcp-config FILE (MCP servers whose tools the code may call) "
            "or --cli-config FILE (command-line tools the code may run)"
        )
    return tools_module


def load_cli_config_file(path: str | None) -> CliConfig | None:
    """The ``--cli-config`` file, checked (a usage error names what is wrong), or None."""
    if not path:
        return None
    from codemode.activities.cli_tools import CliConfigError, load_cli_config

    try:
        return load_cli_config(path)
    except CliConfigError as err:
        raise Fail(f"--cli-config: {err}") from None


def open_cli(registry: ToolRegistry | None, config: CliConfig | None) -> ToolRegistry | None:
    """Add the configured command-line tools to ``registry`` (a new one when None). Every
    binary must be there: one that is not fails the start, naming it. Runs no command."""
    if config is None:
        return registry
    from codemode.activities.cli_tools import CliStartError, CliTools
    from codemode.activities.tools import ToolRegistry

    try:
        specs = CliTools(config).start().tool_specs()
    except CliStartError as err:
        raise Fail(f"--cli-config: {err}") from None
    registry = registry if registry is not None else ToolRegistry()
    try:
        return registry.include(specs)
    except ValueError as err:
        raise Fail(f"--cli-config: {err}") from None


def load_mcp_config_file(path: str | None) -> McpConfig | None:
    """The ``--mcp-config`` file, checked (a usage error names what is wrong), or None."""
    if not path:
        return None
    from codemode.activities.mcp_tools import INSTALL_HINT, McpConfigError, load_mcp_config

    try:
        config = load_mcp_config(path)
    except McpConfigError as err:
        raise Fail(f"--mcp-config: {err}") from None
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise Fail(INSTALL_HINT) from None
    return config


async def open_mcp(registry: ToolRegistry | None, config: McpConfig | None) -> tuple[ToolRegistry, McpServers | None]:
    """Start the configured MCP servers and add their tools to ``registry`` (a new one when
    None). The caller closes the servers (a worker does when it stops)."""
    if config is None:
        assert registry is not None
        return registry, None
    from codemode.activities.mcp_tools import McpServers, McpStartError
    from codemode.activities.tools import ToolRegistry

    servers = McpServers(config)
    try:
        await servers.start()
    except McpStartError as err:
        raise Fail(f"--mcp-config: {err}") from None
    registry = registry if registry is not None else ToolRegistry()
    try:
        registry.include(servers.tool_specs())
    except ValueError as err:
        await servers.aclose()
        raise Fail(f"--mcp-config: {err}") from None
    return registry, servers


async def open_client(address: str | None = None, *, quick: bool = False, **options: Any) -> Client:
    """A client for the running command's target (its connection flags over Temporal's
    environment configuration; ``address``: another address, configured the same way);
    ``options`` go to ``Client.connect``, e.g. ``runtime``. ``quick``: a command that asks
    or decides and exits (no worker of its own): it installs the tracing interceptor only
    when this process has a tracer provider to send spans to
    (``telemetry.tracer_provider_configured``); without one the spans would go nowhere, and
    importing the interceptor is a third of such a command's start-up. A refusal (a
    credential, a certificate, a namespace) is one line naming the address, the namespace
    and the credential used."""
    from codemode.worker import telemetry
    from codemode.worker.connection import ConnectionRefused, connect, server_answers

    target = command_target(address)
    if not server_answers(target.address):
        raise Fail(
            f"no Temporal server answers at {target.describe()}; start one with `codemode server` "
            "(or `codemode dev --tools MODULE`), or point --address / --profile (TEMPORAL_ADDRESS, "
            "TEMPORAL_PROFILE) at yours"
        )
    await open_store()
    encryption_keys()  # a malformed CODEMODE_ENCRYPTION_KEYS says so, not "cannot connect"
    try:
        tracing = False if quick and not telemetry.tracer_provider_configured() else None
        return await connect(target=target, tracer=tracing, **options)
    except ConnectionRefused as err:
        raise Fail(str(err)) from None
    except Exception as err:
        raise Fail(f"cannot connect to Temporal at {target.describe()}: {type(err).__name__}: {err}") from None


async def open_store() -> BlobStore:
    """The object store the environment configures (payloads and checkpoints live there)."""
    from codemode.storage import BlobStoreError
    from codemode.worker.converter import default_store

    try:
        return await default_store()
    except (BlobStoreError, ValueError) as err:
        raise Fail(f"cannot open the object store: {err}") from None


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
    from codemode.storage.encryption import EncryptionKeyError, Keyring

    try:
        return Keyring.from_env()
    except EncryptionKeyError as err:
        raise Fail(str(err)) from None


async def start_server(
    port: int, ui_port: int | None, db: str | None, codec_port: int = DEFAULT_CODEC_PORT, *, namespace: str | None = None
) -> EmbeddedServer:
    """The embedded server (with a codec server for its web UI when encryption keys are set)."""
    from codemode.worker.dev_server import ServerStartError, start_dev_server

    encryption_keys()  # a malformed CODEMODE_ENCRYPTION_KEYS is a usage error, said first
    await open_store()
    try:
        return await start_dev_server(port, ui_port, db, codec_port=codec_port, notify=note, namespace=namespace)
    except (ServerStartError, FileNotFoundError) as err:
        raise Fail(f"cannot start the embedded Temporal server: {err}") from None


async def start_codec_server(
    port: int,
    ui_origins: Sequence[str],
    *,
    host: str = "127.0.0.1",
    token: str | None = None,
    namespaces: Sequence[str] = (),
    fallback: bool = True,
) -> CodecServer:
    """A running codec server over this process's data converter (see ``serve_codec``)."""
    from codemode.worker.codec_server import serve_codec

    store = await open_store()
    try:
        return await serve_codec(
            store, port, ui_origins, host=host, token=token, namespaces=namespaces, fallback=fallback, notify=note
        )
    except OSError as err:
        raise Fail(f"cannot serve the codec server on {host}:{port}: {err.strerror or err}") from None
