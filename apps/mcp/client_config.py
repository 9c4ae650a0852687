"""The ``mcpServers`` snippet a client's configuration takes (Claude Desktop, Cursor, VS Code
and others read this shape): how to start the server over stdio, or where it listens over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import Any


def codemode_command() -> list[str]:
    """How to start ``codemode`` from anywhere: its console script, else this interpreter."""
    script = shutil.which("codemode", path=os.path.dirname(sys.executable)) or shutil.which("codemode")
    return [os.path.abspath(script)] if script else [sys.executable, "-m", "codemode"]


def stdio_entry(args: list[str], env: dict[str, str]) -> dict[str, Any]:
    command = codemode_command()
    entry: dict[str, Any] = {"command": command[0], "args": [*command[1:], "mcp", *args]}
    if env:
        entry["env"] = env
    return entry


def http_entry(url: str, token: str) -> dict[str, Any]:
    return {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}


def snippet(name: str, entry: dict[str, Any]) -> str:
    return json.dumps({"mcpServers": {name: entry}}, indent=2)
