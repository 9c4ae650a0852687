"""The doors agents come through: the pydantic-ai capability (``codemode.integrations.pydantic_ai``)
and the MCP server front (``codemode.apps.mcp``, the ``codemode mcp`` command). The top
layer: it imports the engine below it, nothing imports it, and each integration's own
dependency is an optional extra imported only when that integration is
(``pip install -e '.[pydantic-ai]'``, ``'.[mcp]'``)."""
