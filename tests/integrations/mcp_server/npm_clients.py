"""MCP clients and checkers nobody here wrote, from npm: the MCP Inspector (its CLI mode is a
real client), the conformance suite, and the Node 22 the suite needs (npm's ``node`` package
carries the binary; the machine's node is 20). Installed once into a cache directory that
``.ci/run`` fills ahead (``python -m tests.integrations.mcp_server.npm_clients``)."""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

PACKAGES = ("@modelcontextprotocol/inspector@2.12.0", "@modelcontextprotocol/conformance@0.1.16", "node@22")


def npm_dir() -> Path:
    default = Path.home() / ".cache" / "codemode" / "npm-mcp-clients"
    return Path(os.environ.get("CODEMODE_NPM_MCP_CLIENTS") or default)


def bin_path(name: str) -> Path:
    return npm_dir() / "node_modules" / ".bin" / name


def node22_bin_dir() -> Path:
    """Put first on PATH for tools that need Node 22."""
    return npm_dir() / "node_modules" / "node" / "bin"


def ensure_installed() -> Path:
    """Install the packages (idempotent: a stamp names what is there)."""
    root = npm_dir()
    stamp = root / "installed.txt"
    wanted = "\n".join(PACKAGES)
    if stamp.exists() and stamp.read_text() == wanted and bin_path("mcp-inspector").exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:  # parallel test sessions share the cache
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.exists() and stamp.read_text() == wanted and bin_path("mcp-inspector").exists()):
            subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(root),
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--cache",
                    str(root / ".npm-cache"),
                    *PACKAGES,
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=900,
            )
            stamp.write_text(wanted)
    return root


if __name__ == "__main__":
    print(ensure_installed())
