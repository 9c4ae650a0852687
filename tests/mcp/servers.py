"""The MCP servers the tests run: the npm reference servers (installed once into a cache,
by ``.ci/run`` or here on first use) and ``fault_server.py``."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

#: The reference servers, pinned (``npm install`` of these exact versions).
NPM_PACKAGES = {
    "memory": "@modelcontextprotocol/server-memory@2026.8.31",
    "filesystem": "@modelcontextprotocol/server-filesystem@2026.8.31",
    "everything": "@modelcontextprotocol/server-everything@2026.8.31",
}
#: Where they are installed: ``$CODEMODE_MCP_NPM_DIR``, else a cache under the user's home.
NPM_DIR = Path(os.environ.get("CODEMODE_MCP_NPM_DIR") or Path.home() / ".cache" / "codemode" / "mcp-servers")
FAULT_SERVER = Path(__file__).with_name("fault_server.py")


def npm_bin() -> Path:
    """``node_modules/.bin`` holding ``mcp-server-memory`` and the others, installed with npm
    the first time (under a lock: parallel test sessions share the cache)."""
    bin_dir = NPM_DIR / "node_modules" / ".bin"
    if all((bin_dir / f"mcp-server-{name}").exists() for name in NPM_PACKAGES):
        return bin_dir
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is needed to install the MCP reference servers (apt-get install npm)")
    NPM_DIR.mkdir(parents=True, exist_ok=True)
    with open(NPM_DIR / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all((bin_dir / f"mcp-server-{name}").exists() for name in NPM_PACKAGES):
            subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                    str(NPM_DIR),
                    *NPM_PACKAGES.values(),
                ],
                check=True,
                timeout=600,
            )
    return bin_dir


def reference_server(name: str, *args: str, **settings: Any) -> dict[str, Any]:
    """An ``mcpServers`` entry for a reference server (``settings``: env, policy keys...)."""
    return {"command": str(npm_bin() / f"mcp-server-{name}"), "args": list(args), **settings}


def fault_server(events: Path, **settings: Any) -> dict[str, Any]:
    env = {"FAULT_EVENTS": str(events), "PYTHONPATH": os.pathsep.join(sys.path)}
    return {"command": sys.executable, "args": [str(FAULT_SERVER)], "env": env, **settings}


def fault_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
