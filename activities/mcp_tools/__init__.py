"""MCP servers' tools as durable functions in code (``--mcp-config FILE``).

- ``config.py``: the ``{"mcpServers": {...}}`` file, ``${VAR}`` expansion, policy keys;
- ``pool.py``: one live connection per server, restarted when it dies, closed with the worker;
- ``specs.py``: the servers' tools as ``ToolSpec``s (namespaces, aliases, canonical ids,
  stubs from JSON Schema, approval and retry policy from annotations);
- ``servers.py``: ``McpServers`` (start, the specs, each call's failure semantics);
- ``results.py``: a tool result as a Python value (handles for bytes).

The MCP SDK is an optional dependency (``pip install 'durable-codemode[mcp]'``): the
configuration loads without it, the servers need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .config import McpConfig, McpConfigError, ServerConfig, ToolSettings, load_mcp_config

if TYPE_CHECKING:
    from .pool import McpUnreachable
    from .servers import McpServers, McpStartError
    from .specs import McpToolSpec

INSTALL_HINT = "MCP servers as tools need the MCP SDK: pip install 'durable-codemode[mcp]' (or pip install 'mcp>=2,<3')"

_LAZY = {
    "McpServers": "servers",
    "McpStartError": "servers",
    "McpToolSpec": "specs",
    "McpUnreachable": "pool",
}

__all__ = [
    "INSTALL_HINT",
    "McpConfig",
    "McpConfigError",
    "McpServers",
    "McpStartError",
    "McpToolSpec",
    "McpUnreachable",
    "ServerConfig",
    "ToolSettings",
    "load_mcp_config",
]


def __getattr__(name: str) -> Any:
    """Import what needs the MCP SDK only when it is used, with an install hint without it."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        import mcp  # noqa: F401
    except ImportError as err:
        raise ImportError(INSTALL_HINT) from err
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
