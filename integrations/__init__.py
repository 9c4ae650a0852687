"""The doors agents come through, above the engine (runtimes <- activities <- workflows <-
worker <- integrations): ``mcp_server/`` serves durable code mode to any MCP client.

Each integration brings optional dependencies (an extra in ``pyproject.toml``) and imports
them lazily, so the engine and its CLI run without them. Nothing below imports this layer.
"""
