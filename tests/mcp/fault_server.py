"""An MCP server built with the SDK's own ``MCPServer``, run over stdio by the tests that need
faults the reference servers cannot make: it can be killed mid-call, answer with an error
result or a JSON-RPC error, and notice being cancelled.

Every call appends an event to the JSONL file ``$FAULT_EVENTS`` (with this process's pid),
so a test sees every request the server received, across restarts. When the file named by
``$FAULT_FAIL_START`` exists, the server deletes it and exits at once (one failed start).

    python tests/mcp/fault_server.py
"""

from __future__ import annotations

import asyncio
import json
import os
import time


def _event(kind: str, **extra: object) -> None:
    path = os.environ.get("FAULT_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"event": kind, "pid": os.getpid(), "t": time.time(), **extra}) + "\n")


if __name__ == "__main__":  # before importing the SDK (a second or more): a refusal is quick
    flag = os.environ.get("FAULT_FAIL_START")
    if flag and os.path.exists(flag):  # fail this start (once): the flag file is used up
        os.unlink(flag)
        _event("refused-start")
        raise SystemExit("fault server: refusing to start this time")

import mcp.types as types  # noqa: E402
from mcp import MCPError  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from mcp.server.mcpserver.exceptions import ToolError  # noqa: E402

server = MCPServer("faults")

READ_ONLY = types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False)
#: Changes state, not destructive, not idempotent: a second call appends twice.
APPENDS = types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)


@server.tool(annotations=READ_ONLY, structured_output=False)
async def lookup(key: str, seconds: float = 0.0) -> str:
    """Read a value (read-only): takes ``seconds``."""
    _event("lookup", key=key)
    await asyncio.sleep(seconds)
    _event("lookup-done", key=key)
    return f"value of {key}"


@server.tool(annotations=APPENDS, structured_output=False)
async def append(line: str, ctx: Context, seconds: float = 0.0) -> str:
    """Append a line to the journal (not idempotent): takes ``seconds``."""
    meta = ctx.request_context.meta or {}
    _event("append", line=line, key=meta.get("codemode/idempotency-key"))
    await asyncio.sleep(seconds)
    _event("append-done", line=line)
    return f"appended {line}"


@server.tool(annotations=READ_ONLY, structured_output=False)
def fail(reason: str) -> str:
    """Always fails: an error result carrying ``reason``."""
    _event("fail", reason=reason)
    raise ToolError(f"cannot do that: {reason}")


@server.tool(annotations=READ_ONLY, structured_output=False)
def strict(n: int) -> int:
    """Refuses odd numbers with a JSON-RPC invalid-params error."""
    _event("strict", n=n)
    if n % 2:
        raise MCPError(code=types.INVALID_PARAMS, message=f"n must be even, got {n}")
    return n // 2


@server.tool(annotations=READ_ONLY, structured_output=False)
async def slow(seconds: float) -> str:
    """Sleeps; records whether it finished or was cancelled."""
    _event("slow")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        _event("slow-cancelled")
        raise
    _event("slow-done")
    return "slept"


if __name__ == "__main__":
    _event("started")
    server.run("stdio")
