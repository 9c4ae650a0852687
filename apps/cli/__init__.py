"""``codemode``: run code durably, decide approvals, read the audit, run a worker or a server.

One module per command group, so a command is found by its file name:

- ``run.py``: ``run``, ``result`` (and the follower that shows tool calls as they happen)
- ``decide.py``: ``approve``, ``deny``, ``answer``, ``cancel``
- ``inspect.py``: ``status``, ``history``
- ``listing.py``: ``list``
- ``artifacts.py``: ``artifacts`` (list an execution's files, or fetch one)
- ``serve.py``: ``worker``, ``server``, ``dev``
- ``tools.py``: ``tools``
- ``session.py``: ``session list|show|close|export`` (``run --session NAME`` sends a cell)
- ``codec.py``: ``keygen``, ``codec-server`` (encryption keys, and decrypting for the web UI and CLI)
- ``storage.py``: ``gc``
- ``common.py``: options, ``Fail``, exit codes and helpers they share

A person types these while an execution waits for them, so a command costs only what it
uses: ``COMMANDS`` names each command's module and short help, ``codemode --help`` lists them
from it without importing any, and a command's module is imported when the command is named.
The modules import click and ``common`` at the top, and Temporal, pydantic and the layers
below inside the functions that run (``tests/cli/test_startup.py`` holds them to it).

Commands of the layers above (``codemode mcp``, in ``integrations/``) register under the
``codemode.commands`` entry points in ``pyproject.toml``; the group loads one only when it is
named, so this package never imports ``integrations``.

Exit codes: 0 success, 1 code error (or a failed execution), 2 usage or input error,
3 awaiting approval. Every command that talks to a server takes the ``temporal`` CLI's
connection flags (``--address``, ``--namespace``, ``--api-key``, ``--tls*``, ``--profile``,
``--config-file``: ``connection_options.py``) over Temporal's ``TEMPORAL_*`` variables and profile.
Progress (tool calls as they happen) goes to stderr; results go to stdout.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from typing import NamedTuple

import click

from codemode.apps.command_line import note

#: Entry-point group under which the layers above worker/ register commands.
COMMANDS_GROUP = "codemode.commands"


class Entry(NamedTuple):
    #: The module under ``codemode.apps.cli`` that defines it; None: a ``codemode.commands``
    #: entry point of that name.
    module: str | None
    attribute: str
    #: What ``codemode --help`` shows: the command's own short help (a test keeps them equal).
    short_help: str


#: Every command, by name.
COMMANDS: dict[str, Entry] = {
    "answer": Entry(
        "decide",
        "answer",
        "Answer a tool call waiting for approval instead of the tool: the code gets RESULT as the call's result "
        "and the tool does not run (RESULT must fit what the tool returns).",
    ),
    "approve": Entry(
        "decide",
        "approve",
        "Approve a tool call waiting for approval (CALL_ID as printed by run/status), or every waiting call "
        "with --all.",
    ),
    "artifacts": Entry("artifacts", "artifacts", "List an execution's artifacts, or fetch the one called NAME."),
    "cancel": Entry("decide", "cancel", "Cancel an execution: it stops where it is, even while it waits for approval."),
    "codec-server": Entry(
        "codec",
        "codec_server",
        "Serve the Temporal codec server protocol (POST /encode, /decode, /download) with the keys in "
        "CODEMODE_ENCRYPTION_KEYS, until Ctrl-C.",
    ),
    "deny": Entry(
        "decide",
        "deny",
        "Deny a tool call waiting for approval (CALL_ID as printed by run/status), or every waiting call with --all.",
    ),
    "dev": Entry(
        "serve",
        "dev",
        "The embedded server and a worker in one process, until Ctrl-C (with CODEMODE_ENCRYPTION_KEYS set, "
        "also the codec server for the web UI).",
    ),
    "gc": Entry("storage", "gc", "Delete what closed executions stored (payloads, checkpoints) past retention."),
    "history": Entry(
        "inspect", "history", "The audit timeline from the Temporal history: calls, attempts, approvals, timings."
    ),
    "inbox": Entry(
        "inbox",
        "inbox",
        "Serve the approvals inbox: every call waiting for approval, to approve, deny, edit then approve, or answer "
        "instead of the tool, as the signed-in person; until Ctrl-C.",
    ),
    "keygen": Entry(
        "codec",
        "keygen",
        "Print a new random AES-256 key as KEY_ID:BASE64 (for CODEMODE_ENCRYPTION_KEYS), or an approver's key pair.",
    ),
    "list": Entry(
        "listing", "list_executions", "Executions newest first, from the server's visibility index (no worker needed)."
    ),
    "mcp": Entry(None, "mcp", "Serve durable code mode to MCP clients: tools search, get_schema, execute and result."),
    "result": Entry("run", "result", "Wait for an execution's outcome (same output and exit codes as run)."),
    "run": Entry("run", "run", "Run a code file (or - for stdin) and show each tool call as it happens."),
    "server": Entry(
        "serve",
        "server",
        "Run the embedded Temporal dev server (SQLite, web UI) until Ctrl-C; with CODEMODE_ENCRYPTION_KEYS "
        "set, also a codec server the web UI decrypts through.",
    ),
    "session": Entry(
        "session",
        "session",
        "Sessions: cells that share a namespace (send one with `codemode run FILE --session NAME`).",
    ),
    "status": Entry(
        "inspect", "status", "An execution's state, pending approvals, tool calls so far and stdout (the status query)."
    ),
    "tools": Entry("tools", "tools", "The tools, their policies, and the prompt (with stubs) as an LLM would see it."),
    "worker": Entry("serve", "worker", "Run a worker for the workflow, the sandbox steps and the tools, until Ctrl-C."),
}


class LazyGroup(click.Group):
    """The commands of ``COMMANDS``, each imported the first time it is named; the short help
    ``--help`` shows comes from the table. A name outside it may be a command that another
    package registered under ``codemode.commands``: it is looked up then."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = self.commands.get(name)
        if command is None:
            command = _load(name)
            if command is not None:
                self.add_command(command, name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists commands, from the table for those not loaded yet (none is imported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = []
        for name in names:
            command = self.commands.get(name)
            if command is None:  # click's own shortening, on the table's text
                command = click.Command(name, help=COMMANDS[name].short_help)
            if not command.hidden:
                rows.append((name, command.get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _load(name: str) -> click.Command | None:
    entry = COMMANDS.get(name)
    if entry is not None and entry.module is not None:
        return getattr(importlib.import_module(f"{__name__}.{entry.module}"), entry.attribute)
    from importlib.metadata import entry_points

    found = entry_points(group=COMMANDS_GROUP, name=name)
    return next(iter(found)).load() if found else None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
# The installed distribution's version (pyproject.toml reads it from codemode/_version.py): read
# when --version is asked, and never an import of the package's face from below it.
@click.version_option(
    None, "--version", "-V", package_name="durable-codemode", prog_name="codemode", message="%(prog)s %(version)s"
)
def cli() -> None:
    """Durable code mode: run LLM-written Python in a sandbox, every step durable on Temporal."""


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and leave with ``os._exit``: temporalio can crash at interpreter exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code = cli.main(args=argv, prog_name="codemode", standalone_mode=False)
    except click.exceptions.Exit as err:
        code = err.exit_code
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except (click.Abort, KeyboardInterrupt):
        note("Interrupted.")
        code = 130
    except Exception as err:  # an unexpected fault: say what it was, not a traceback wall
        if os.environ.get("CODEMODE_DEBUG"):
            import traceback

            traceback.print_exc()
        note(f"error: {type(err).__name__}: {err}")
        if _encrypted_payload(err):
            note("This execution's payloads are encrypted: set CODEMODE_ENCRYPTION_KEYS to a list that holds its key.")
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0)


def _encrypted_payload(err: BaseException | None) -> bool:
    """Whether a failure came from a payload encrypted under no key this process holds (the
    SDK says "Unknown payload encoding binary/encrypted" when no keys are set at all)."""
    while err is not None:
        if "binary/encrypted" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False
