"""The undo guide's worked example (docs/guides/undo.md) runs as written against a real server:
a transfer refunded by "deny and roll back" and by a rollback after the run ended, a file written
through the npm filesystem MCP server and removed, a git commit reverted."""

from __future__ import annotations

import asyncio
import os
import sys

import pytest

from tests.cli.runner import REPO
from tests.mcp.servers import npm_bin


async def run_example(name: str, temporal_address: str, **env: str) -> str:
    environ = {**os.environ, "TEMPORAL_ADDRESS": temporal_address, "PYTHONPATH": str(REPO), **env}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        f"examples.{name.removesuffix('.py')}",  # (a script's folder first on sys.path: examples/email.py)
        cwd=REPO,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out.decode()}\n{err.decode()}"
    return out.decode()


def test_the_guide_shows_the_examples_whole() -> None:
    guide = (REPO / "docs" / "guides" / "undo.md").read_text()
    for name in ("undo_transfer.py", "undo_files.py", "undo_git.py"):
        assert f'--8<-- "examples/{name}"' in guide, name


async def test_a_transfer_and_its_refund(temporal_address: str) -> None:
    out = await run_example("undo_transfer.py", temporal_address)
    assert "can be undone: True" in out
    assert """would compensate: ["2: transfer(to='bolt', amount=200)", "1: transfer(to='acme', amount=100)"]""" in out
    assert (
        "denied and rolled back: [(\"transfer(to='bolt', amount=200)\", 'compensated'), "
        "(\"transfer(to='acme', amount=100)\", 'compensated')]" in out
    )
    assert "refunds: [-200, -100]" in out
    assert "[(\"transfer(to='dune', amount=7)\", 'compensated')]" in out and "rollback:exec-" in out


@pytest.mark.timeout(600)
async def test_a_file_written_and_removed(temporal_address: str) -> None:
    server = str(npm_bin() / "mcp-server-filesystem")
    out = await run_example("undo_files.py", temporal_address, CODEMODE_FS_SERVER=server)
    assert "written: ['report.md']" in out
    assert "rolled back: [('mcp:fs/write_file', 'compensated')]" in out
    assert "files: [] trash: ['1-report.md']" in out


async def test_a_git_commit_reverted(temporal_address: str) -> None:
    out = await run_example("undo_git.py", temporal_address)
    assert "committed: [main " in out and "greet the world" in out
    assert "rolled back: [('cli:git/commit', 'compensated')]" in out
    assert "log: ['Revert \"greet the world\"', 'greet the world', 'first']" in out
    assert "app.py: print('hello')" in out
