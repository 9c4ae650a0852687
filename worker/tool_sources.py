"""Loading the tools a worker serves, in one place: a Python tools module (``--tools``), MCP
servers (``--mcp-config``) and command-line tools (``--cli-config``), as one ``ToolRegistry``.

``ToolSources(...).load()`` imports the module, checks both files and starts the CLI tools
(each binary must be there; no command runs); the MCP servers start only when a worker of this
process needs them (``Tools.start_mcp``), and whoever started them closes them
(``Tools.aclose``; a worker closes them too). Every refusal is a ``ToolSourceError`` whose
message names the flag at fault, for the applications to show as they show usage errors.

Imports the standard library only until it loads something: the commands import it to start."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from codemode.activities.cli_tools import CliConfig
    from codemode.activities.mcp_tools import McpConfig, McpServers
    from codemode.activities.tools import ToolRegistry


class ToolSourceError(ValueError):
    """A tools module, an MCP config or a CLI config that cannot be loaded or started; the
    message is the one line a person reads (it names the flag)."""


def load_tools_module(module: str) -> ToolRegistry:
    """Import a tools module from the current directory (a dotted name or a ``.py`` path)."""
    from codemode.activities.tools import ToolRegistry

    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    name = module[:-3].replace(os.sep, ".").strip(".") if module.endswith(".py") else module
    try:
        return ToolRegistry.from_module(name)
    except ModuleNotFoundError as err:
        raise ToolSourceError(
            f"cannot import tools module {module!r}: {err} (run from the folder that contains it)"
        ) from None
    except ValueError as err:
        raise ToolSourceError(f"tools module {module!r}: {err}") from None
    except Exception as err:
        raise ToolSourceError(f"importing tools module {module!r} failed: {type(err).__name__}: {err}") from None


@dataclass(frozen=True)
class ToolSources:
    """Where the tools come from, as a person named them (module name, file paths)."""

    tools_module: str | None = None
    mcp_config: str | None = None
    cli_config: str | None = None

    def __bool__(self) -> bool:
        return bool(self.tools_module or self.mcp_config or self.cli_config)

    def require(self) -> ToolSources:
        """These sources, or a ``ToolSourceError`` when none is named."""
        if not self:
            raise ToolSourceError(
                "missing --tools MODULE (the module whose public functions are the tools), "
                "--mcp-config FILE (MCP servers whose tools the code may call) "
                "or --cli-config FILE (command-line tools the code may run)"
            )
        return self

    def load(self) -> Tools:
        """The tools module imported, both files checked and the CLI tools started (in that
        order: the first that fails says so). The MCP servers are not started here."""
        registry = load_tools_module(self.tools_module) if self.tools_module else None
        mcp = load_mcp_config_file(self.mcp_config)
        cli = load_cli_config_file(self.cli_config)
        return Tools(self, add_cli_tools(registry, cli), mcp, cli)


def load_cli_config_file(path: str | None) -> CliConfig | None:
    """The ``--cli-config`` file, checked, or None."""
    if not path:
        return None
    from codemode.activities.cli_tools import CliConfigError, load_cli_config

    try:
        return load_cli_config(path)
    except CliConfigError as err:
        raise ToolSourceError(f"--cli-config: {err}") from None


def add_cli_tools(registry: ToolRegistry | None, config: CliConfig | None) -> ToolRegistry | None:
    """Add the configured command-line tools to ``registry`` (a new one when None). Every
    binary must be there: one that is not fails the start, naming it. Runs no command."""
    if config is None:
        return registry
    from codemode.activities.cli_tools import CliStartError, CliTools
    from codemode.activities.tools import ToolRegistry

    try:
        specs = CliTools(config).start().tool_specs()
    except CliStartError as err:
        raise ToolSourceError(f"--cli-config: {err}") from None
    registry = registry if registry is not None else ToolRegistry()
    try:
        return registry.include(specs)
    except ValueError as err:
        raise ToolSourceError(f"--cli-config: {err}") from None


def load_mcp_config_file(path: str | None) -> McpConfig | None:
    """The ``--mcp-config`` file, checked (and the MCP SDK there to serve it), or None."""
    if not path:
        return None
    from codemode.activities.mcp_tools import INSTALL_HINT, McpConfigError, load_mcp_config

    try:
        config = load_mcp_config(path)
    except McpConfigError as err:
        raise ToolSourceError(f"--mcp-config: {err}") from None
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise ToolSourceError(INSTALL_HINT) from None
    return config


@dataclass
class Tools:
    """The loaded tools: the registry of the module and the CLI tools, and the MCP servers'
    configuration (their tools join the registry when they start)."""

    sources: ToolSources
    registry: ToolRegistry | None
    mcp_config: McpConfig | None = None
    cli_config: CliConfig | None = None
    #: The started MCP servers (``start_mcp``), closed by ``aclose`` or the worker that uses them.
    mcp_servers: McpServers | None = None

    @property
    def servable(self) -> bool:
        """Whether a worker could serve these (any source at all)."""
        return self.registry is not None or self.mcp_config is not None

    async def start_mcp(self) -> ToolRegistry:
        """Start the configured MCP servers (once) and add their tools to the registry."""
        if self.mcp_config is None or self.mcp_servers is not None:
            if self.registry is None:
                raise ToolSourceError("no tools to serve")
            return self.registry
        from codemode.activities.mcp_tools import McpServers, McpStartError
        from codemode.activities.tools import ToolRegistry

        servers = McpServers(self.mcp_config)
        try:
            await servers.start()
        except McpStartError as err:
            raise ToolSourceError(f"--mcp-config: {err}") from None
        registry = self.registry if self.registry is not None else ToolRegistry()
        try:
            registry.include(servers.tool_specs())
        except ValueError as err:
            await servers.aclose()
            raise ToolSourceError(f"--mcp-config: {err}") from None
        self.registry, self.mcp_servers = registry, servers
        return registry

    async def aclose(self) -> None:
        """Close the MCP servers this started (twice is harmless)."""
        if self.mcp_servers is not None:
            await self.mcp_servers.aclose()
