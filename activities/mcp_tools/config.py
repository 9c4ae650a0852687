"""The ``--mcp-config`` file: the ``{"mcpServers": {...}}`` JSON every MCP client reads, plus
our policy keys.

```json
{"mcpServers": {
  "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"],
             "env": {"MEMORY_FILE_PATH": "${HOME}/memory.jsonl"}},
  "docs":   {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
             "approval": "never", "private": true,
             "tools": {"include": ["search_*"], "exclude": ["search_all"],
                       "settings": {"search_code": {"timeout": 120, "alias": "code"}}}}
}}
```

A server is started from ``command``/``args``/``env``/``cwd`` (stdio) or reached at ``url``
with ``headers`` (streamable HTTP; ``"type": "sse"`` for the older SSE transport). ``${VAR}``
(or ``${VAR:-default}``) in those values is read from the worker's environment when the file
is loaded, so secrets live in neither the file nor the workflow history (which never holds
the configuration at all). A stdio server sees only the variables its ``env`` gives it plus
the MCP SDK's short safe list (``PATH``, ``HOME``...), never the worker's whole environment.

Policy keys, per server and per tool (``tools.settings``; a tool's own setting wins):

- ``approval``: ``"annotations"`` (default: a tool needs a person's approval unless the
  server marks it read-only, or explicitly not destructive), ``"always"``, ``"never"``;
- ``approval_when``: conditions on the call's arguments, any of which sends the call to a
  person (``[{"argument": "amount", "op": ">", "value": 500}]``); the other calls of the tool
  run without one (``approvals/approval_when.py``); a parameter is named as the server or
  the code names it, and a tool's own rule on a parameter it lacks fails the load;
- ``idempotent``: ``false`` only: never repeat a call once sent, whatever the server says
  (annotations can be tightened here, not loosened);
- ``max_attempts``, ``timeout`` (seconds): the call's retry policy;
- ``private``: the tool's results are private data (a ``ratchet`` sandbox loses its network
  before the code sees one);
- ``async``: declare the tools ``async def``, so the code awaits them and the calls it
  gathers (``asyncio.gather``) run at the same time (default: plain ``def``);
- per server only: ``namespace`` (the name the code uses, default the server's key),
  ``startup_timeout`` (seconds, default 60: ``npx`` may download first), ``disabled``; per tool only: ``alias`` (its name in the code).

Keys are checked: a misspelt policy key fails the load instead of silently leaving a
destructive tool without approval. Keys other MCP clients write (``type``, ``disabled``,
``autoApprove``, ``alwaysAllow``, ...) are accepted; ``autoApprove``/``alwaysAllow`` are
ignored (approvals here are decided by ``approval``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from codemode.approvals.approval_when import Condition

from ..config_files import ConfigProblem, checked_entry, config_section

Approval = Literal["annotations", "always", "never"]

#: Keys other MCP clients put in the same file, accepted and not acted on.
FOREIGN_KEYS = frozenset({"autoApprove", "alwaysAllow", "description", "transportType", "timeout_ms", "icon"})


class McpConfigError(ValueError):
    """The MCP configuration cannot be used; the message says where and why."""


class _Policy(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    approval: Approval | None = None
    #: Conditions on the call's arguments that send it to a person (``approvals/approval_when.py``).
    approval_when: list[Condition] | None = None
    idempotent: Literal[False] | None = None
    max_attempts: int | None = Field(default=None, ge=1, le=100)
    timeout: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    private: bool | None = None

    @field_validator("idempotent", mode="before")
    @classmethod
    def _only_tighten(cls, value: Any) -> Any:
        if value is True:
            raise ValueError(
                "can only be false: a server's annotations may be tightened here, not loosened "
                "(a tool is retried after a lost answer only when the server marks it idempotent or read-only)"
            )
        return value


class ToolSettings(_Policy):
    """One tool's settings (``tools.settings.<tool name as the server lists it>``)."""

    alias: str | None = None
    #: Declared ``async def``: the code awaits it, and calls it gathers run at once.
    is_async: bool | None = Field(default=None, alias="async")

    @field_validator("alias")
    @classmethod
    def _identifier(cls, value: str | None) -> str | None:
        if value is not None and not value.isidentifier():
            raise ValueError(f"{value!r} is not a Python identifier")
        return value


class ToolFilter(BaseModel):
    """Which of a server's tools the code gets: ``include`` (default: all) minus ``exclude``;
    entries are tool names as the server lists them, ``*``/``?`` wildcards allowed."""

    model_config = ConfigDict(extra="forbid")

    include: list[str] | None = None
    exclude: list[str] = Field(default_factory=list)
    settings: dict[str, ToolSettings] = Field(default_factory=dict)


class ServerConfig(_Policy):
    """One entry of ``mcpServers``, with ``${VAR}`` already expanded."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    type: Literal["stdio", "http", "streamable-http", "streamableHttp", "sse"] | None = None
    namespace: str | None = None
    startup_timeout: float = Field(default=60.0, gt=0)
    disabled: bool = False
    #: Declare the server's tools ``async def`` (see ``ToolSettings.is_async``).
    is_async: bool = Field(default=False, alias="async")
    tools: ToolFilter = Field(default_factory=ToolFilter)

    @model_validator(mode="before")
    @classmethod
    def _drop_foreign(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            return {k: v for k, v in data.items() if k not in FOREIGN_KEYS}
        return data

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError('give either "command" (a stdio server) or "url" (an HTTP server)')
        if self.type == "stdio" and not self.command:
            raise ValueError('"type": "stdio" needs a "command"')
        if self.type not in (None, "stdio") and not self.url:
            raise ValueError(f'"type": "{self.type}" needs a "url"')
        if self.namespace is not None and not self.namespace.isidentifier():
            raise ValueError(f'"namespace": {self.namespace!r} is not a Python identifier')
        return self

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.command:
            return "stdio"
        return "sse" if self.type == "sse" else "http"

    def settings_for(self, tool: str) -> ToolSettings:
        return self.tools.settings.get(tool) or ToolSettings()


class McpConfig(BaseModel):
    """The servers to run, by key (the key is the server's name in canonical ids)."""

    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    #: Where the configuration came from, for messages.
    source: str = "<config>"
    #: The servers' entries before ``${VAR}`` expansion: what messages may show.
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    def describe(self, server: str) -> str:
        """How a server is started, as written in the file (no expanded secrets)."""
        entry = self.raw.get(server) or {}
        if entry.get("url"):
            return str(entry["url"])
        return " ".join([str(entry.get("command", "")), *map(str, entry.get("args") or [])]).strip()


def load_mcp_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> McpConfig:
    """Read and check a configuration: a path to the JSON file, or the parsed mapping.
    ``environ`` (default: the process's) answers ``${VAR}``. Raises ``McpConfigError``."""
    environ = os.environ if environ is None else environ
    try:
        where, raw = config_section(source, "mcpServers", kind="server", example='{"name": {...}}')
    except ConfigProblem as err:
        raise McpConfigError(str(err)) from None
    servers: dict[str, ServerConfig] = {}
    for name, entry in raw.items():
        try:
            server = checked_entry(ServerConfig, name, entry, environ=environ, expand=_EXPANDED)
        except ConfigProblem as err:
            raise McpConfigError(f"{where}: server {name!r}: {err}") from None
        if not server.disabled:
            servers[name] = server
    return McpConfig(servers=servers, source=where, raw={k: v for k, v in raw.items() if k in servers})


#: The entry keys whose values may name environment variables.
_EXPANDED = frozenset({"command", "args", "env", "cwd", "url", "headers"})
