"""``codemode mcp``: durable code mode as an MCP server, for any MCP client.

Four tools over the official MCP SDK (the ``mcp`` extra): ``search`` and ``get_schema`` to
discover the host tools, ``execute`` to run code against them as one durable execution, and
``result`` for a run that waited for a person. Approvals reach the person through the
client's elicitation; no tool lets the model decide one.

One file, one concern:

- ``command.py``: the ``codemode mcp`` command (registered as an entry point; imports the
  rest only when run, with an install hint when the extra is missing)
- ``server.py``: the MCP server and its four tools
- ``catalog.py``: what the model is shown: stubs, the ``execute`` description, close matches
- ``search.py``: the BM25 index behind ``search``
- ``executions.py``: starting a run, following it to its outcome, progress per tool call
- ``approvals.py``: asking the person through elicitation (both protocol eras) and applying
  the answer through the workflow's ``decide`` Update
- ``reports.py``: the result shape (``structuredContent`` and readable text)
- ``backend.py``: Temporal for the server: the one at ``TEMPORAL_ADDRESS``, or the embedded
  one, and an in-process worker when none polls
- ``http.py``: streamable HTTP: bearer tokens, ``Origin``/``Host`` checks, the loopback rule
- ``client_config.py``: the ``mcpServers`` snippet for a client's configuration
"""
