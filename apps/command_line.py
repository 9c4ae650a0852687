"""What the applications' commands share (``codemode ...`` in ``cli/`` and ``codemode mcp`` in
``mcp/``): exit codes, ``Fail`` and ``note``, the value types of their options, the options
themselves (the tool sources, the task queue; the connection flags are ``connection_flags.py``),
and the client library's and the worker's typed errors turned into usage errors.

Imports click and the standard library only: every command's ``--help`` imports it."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from codemode.apps.connection_flags import connection_options

if TYPE_CHECKING:
    from codemode.worker.tool_sources import Tools

__all__ = ["connection_options"]

F = TypeVar("F", bound=Callable[..., Any])

#: The task queue workers poll unless told otherwise (``codemode.workflows.models.TASK_QUEUE``;
#: a test keeps them equal, so that ``--help`` need not import the workflow's models).
TASK_QUEUE = "codemode"

EXIT_OK, EXIT_CODE_ERROR, EXIT_USAGE, EXIT_AWAITING_APPROVAL = 0, 1, 2, 3


class Fail(click.ClickException):
    """A clean failure with a message and an exit code (2 unless said otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def note(message: str) -> None:
    click.echo(message, err=True)


# -- options shared by the applications' commands ---------------------------------------------

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


def tool_source_options(command: F) -> F:
    """``--tools``, ``--mcp-config`` and ``--cli-config``, in that order: where a command's tools
    come from (``load_tool_sources`` loads them)."""
    return tools_option(mcp_config_option(cli_config_option(command)))


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


@contextlib.contextmanager
def usage_errors() -> Iterator[None]:
    """The typed errors of the layers below, as the usage errors a person reads (exit 2):
    tool sources, connection settings and refusals, encryption keys, a backend that could not
    be reached or started. Anything else passes through."""
    from codemode.client.backend import BackendError
    from codemode.storage.encryption import EncryptionKeyError
    from codemode.worker.connection import ConnectionConfigError, ConnectionRefused
    from codemode.worker.tool_sources import ToolSourceError

    try:
        yield
    except (ToolSourceError, BackendError, ConnectionRefused, ConnectionConfigError, EncryptionKeyError) as err:
        raise Fail(str(err)) from None


def load_tool_sources(
    tools_module: str | None, mcp_config: str | None, cli_config: str | None, *, required: bool = True
) -> Tools:
    """The tools of ``--tools``, ``--mcp-config`` and ``--cli-config`` loaded (the MCP servers
    not started yet); ``required``: one of them must be given."""
    from codemode.worker.tool_sources import ToolSources

    sources = ToolSources(tools_module, mcp_config, cli_config)
    with usage_errors():
        return (sources.require() if required else sources).load()
