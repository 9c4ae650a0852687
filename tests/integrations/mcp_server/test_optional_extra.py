"""The MCP front is optional: without the ``mcp`` extra the CLI still lists ``codemode mcp``
(registered as an entry point, nothing of the SDK imported), and running it says what to
install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoMcp(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("mcp", "mcp_types", "rank_bm25"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoMcp())
    import click
    from codemode.apps.cli import cli

    report = {}
    with click.Context(cli) as ctx:
        report["listed"] = "mcp" in cli.list_commands(ctx)
        command = cli.get_command(ctx, "mcp")
    try:
        command.main(["--tools", "examples.tools"], standalone_mode=False)
    except click.ClickException as err:
        report["error"] = err.message
    report["loaded"] = any(m.split(".")[0] in ("mcp", "mcp_types") for m in sys.modules)
    print(json.dumps(report))
    """
)


def test_without_the_extra_the_command_says_what_to_install() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["listed"] is True and report["loaded"] is False
    assert "pip install 'durable-codemode[mcp]'" in report["error"]
