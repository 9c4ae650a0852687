"""The applications built on the client library: the ``codemode`` command (``cli/``), the
approvals inbox (``inbox/``) and the MCP front (``mcp/``). Each uses the client library's
public functions (``codemode.client``), never another application's modules: the CLI starts
the inbox through its face (``codemode.apps.inbox``) and finds ``codemode mcp`` through an
entry point."""
