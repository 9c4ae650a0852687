"""What every command group shares: exit codes, ``Fail``, the common options, and helpers that
reach the server (connect, find an execution, ask it for its status) or load a tools module."""

from __future__ import annotations

import getpass
import os
import re
import socket
import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.service import RPCError, RPCStatusCode

from activities.encryption import EncryptionKeyError, Keyring
from activities.storage import BlobStore, BlobStoreError
from activities.tools import ToolRegistry
from worker.client import DEFAULT_ADDRESS, connect
from worker.codec_server import DEFAULT_PORT as DEFAULT_CODEC_PORT
from worker.codec_server import CodecServer
from worker.converter import default_store
from worker.executions import QUERY_TIMEOUT, query_status  # noqa: F401 (the commands import them from here)
from worker.server import EmbeddedServer, ServerStartError, default_db_path, server_answers
from workflows.models import TASK_QUEUE, ExecutionOutcome

if TYPE_CHECKING:
    from activities.mcp_servers import McpConfig, McpServers

EXIT_OK, EXIT_CODE_ERROR, EXIT_USAGE, EXIT_AWAITING_APPROVAL = 0, 1, 2, 3


#: How Temporal closed an execution, in our state words, for the closings the workflow may not
#: have recorded in its own state (a terminate; a cancel or a timeout it did not see through).
CLOSED_STATES = {
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TERMINATED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}


def closed_word(status: WorkflowExecutionStatus | None) -> str:
    """How an execution closed, in our state words where Temporal's differ (canceled)."""
    if status in CLOSED_STATES:
        return CLOSED_STATES[status]
    return status.name.lower() if status is not None else "unknown"


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

address_option = click.option(
    "--address",
    envvar="TEMPORAL_ADDRESS",
    default=DEFAULT_ADDRESS,
    show_default=True,
    show_envvar=True,
    help="Temporal frontend HOST:PORT.",
)
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
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
port_option = click.option("--port", type=int, default=7233, show_default=True, help="gRPC port of the server.")
ui_port_option = click.option("--ui-port", type=int, default=None, help="Web UI port [default: port + 1000].")
db_option = click.option(
    "--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file [default: {default_db_path()}]."
)


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
    """`` --address X`` when the address came from the flag, so printed commands are exact."""
    source = ctx.get_parameter_source("address")
    return f" --address {ctx.params['address']}" if source == click.core.ParameterSource.COMMANDLINE else ""


# -- helpers ------------------------------------------------------------------------------------


def load_tools(module: str) -> ToolRegistry:
    """Import a tools module from the current directory (a dotted name or a ``.py`` path)."""
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


def require_tools(tools_module: str | None, mcp_config: str | None = None) -> str | None:
    if not tools_module and not mcp_config:
        raise Fail(
            "missing --tools MODULE (the module whose public functions are the tools) "
            "or --mcp-config FILE (MCP servers whose tools the code may call)"
        )
    return tools_module


def load_mcp_config_file(path: str | None) -> McpConfig | None:
    """The ``--mcp-config`` file, checked (a usage error names what is wrong), or None."""
    if not path:
        return None
    from activities.mcp_servers import INSTALL_HINT, McpConfigError, load_mcp_config

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
    from activities.mcp_servers import McpServers, McpStartError

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


async def open_client(address: str, **options: Any) -> Client:
    """A client for ``address`` (``options`` go to ``Client.connect``, e.g. ``runtime``)."""
    if not server_answers(address):
        raise Fail(
            f"no Temporal server answers at {address}; start one with `codemode server` "
            "(or `codemode dev --tools MODULE`), or point TEMPORAL_ADDRESS / --address at yours"
        )
    await open_store()
    encryption_keys()  # a malformed CODEMODE_ENCRYPTION_KEYS says so, not "cannot connect"
    try:
        return await connect(address, **options)
    except Exception as err:
        raise Fail(f"cannot connect to Temporal at {address}: {err}") from None


async def open_store() -> BlobStore:
    """The object store the environment configures (payloads and checkpoints live there)."""
    try:
        return await default_store()
    except (BlobStoreError, ValueError) as err:
        raise Fail(f"cannot open the object store: {err}") from None


async def has_workers(client: Client, task_queue: str) -> bool:
    """Whether any worker polls the task queue for workflow tasks."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # cannot tell: assume yes rather than start a second worker
    return any(not _gone_local_process(p.identity) for p in resp.pollers)


def _gone_local_process(identity: str) -> bool:
    """Whether a poller's identity (the SDK's ``pid@host``) names a process of this machine
    that has exited: the server lists a stopped worker's poller for a while, and a command
    started right after one (a client restarting ``codemode mcp``) must not count on it."""
    pid, _, host = identity.partition("@")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


async def existing_handle(client: Client, execution_id: str) -> tuple[WorkflowHandle[Any, Any], Any]:
    handle = client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)
    try:
        return handle, await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Fail(f"no execution {execution_id!r} at {client.service_client.config.target_host}") from None
        raise


def os_user() -> str:
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
    try:
        return Keyring.from_env()
    except EncryptionKeyError as err:
        raise Fail(str(err)) from None


async def start_server(
    port: int, ui_port: int | None, db: str | None, codec_port: int = DEFAULT_CODEC_PORT
) -> EmbeddedServer:
    """The embedded server; with encryption keys set, also a codec server in this process,
    which the web UI is pointed at (``--ui-codec-endpoint``) so it shows plaintext."""
    server = EmbeddedServer(port=port, ui_port=ui_port, db=db)
    if encryption_keys() is not None and server.ui_url:
        ui = server.ui_url
        origins = [ui, ui.replace("//localhost:", "//127.0.0.1:")]
        codec = await start_codec_server(codec_port, sorted(set(origins)))
        server.codec_endpoint = codec.url
        server.on_stop.append(codec.stop)
    try:
        return await server.start()
    except (ServerStartError, FileNotFoundError) as err:
        await server.stop()  # and the codec server started for it
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
    """A running codec server over this process's data converter (its keys, its object store).
    ``fallback``: when ``port`` is taken, take a free one instead of failing."""
    from worker.converter import data_converter

    converter = data_converter(await open_store())
    try:
        return await CodecServer(
            converter, host=host, port=port, ui_origins=ui_origins, token=token, namespaces=namespaces
        ).start()
    except OSError as err:
        if not fallback:
            raise Fail(f"cannot serve the codec server on {host}:{port}: {err.strerror or err}") from None
    note(f"Port {port} is taken; the codec server takes a free port instead.")
    return await CodecServer(
        converter, host=host, port=0, ui_origins=ui_origins, token=token, namespaces=namespaces
    ).start()
