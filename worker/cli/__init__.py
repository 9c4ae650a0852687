"""``codemode``: run code durably, decide approvals, read the audit, run a worker or a server.

One module per command group, so a command is found by its file name:

- ``run.py``: ``run``, ``result`` (and the follower that shows tool calls as they happen)
- ``decide.py``: ``approve``, ``deny``, ``cancel``
- ``inspect.py``: ``status``, ``history``, ``list``
- ``serve.py``: ``worker``, ``server``, ``dev``
- ``tools.py``: ``tools``
- ``session.py``: ``session list|show|close|export`` (``run --session NAME`` sends a cell)
- ``codec.py``: ``keygen``, ``codec-server`` (encryption keys, and decrypting for the web UI and CLI)
- ``common.py``: options, ``Fail``, exit codes and helpers they share

Commands of the layers above (``codemode mcp``, in ``integrations/``) register under the
``codemode.commands`` entry points in ``pyproject.toml``; the group loads one only when it is
named (or ``--help`` lists them), so this package never imports ``integrations``.

Exit codes: 0 success, 1 code error (or a failed execution), 2 usage or input error,
3 awaiting approval. Every client command honours ``TEMPORAL_ADDRESS`` and ``--address``.
Progress (tool calls as they happen) goes to stderr; results go to stdout.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
from importlib.metadata import EntryPoint, entry_points

import click

from codemode._version import __version__
from codemode.worker.cli import codec, decide, inspect, run, serve, session, storage, tools
from codemode.worker.cli.common import note

#: Entry-point group under which the layers above worker/ register commands.
COMMANDS_GROUP = "codemode.commands"


@functools.cache
def _registered_commands() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=COMMANDS_GROUP)}


class CommandGroup(click.Group):
    """The built-in commands, plus the registered ones, loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_registered_commands()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and name in _registered_commands():
            command = _registered_commands()[name].load()
            self.add_command(command, name)
        return command


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="codemode", message="%(prog)s %(version)s")
def cli() -> None:
    """Durable code mode: run LLM-written Python in a sandbox, every step durable on Temporal."""


for _command in (
    run.run,
    run.result,
    decide.approve,
    decide.deny,
    decide.cancel,
    inspect.status,
    inspect.history,
    inspect.list_executions,
    serve.worker,
    serve.server,
    serve.dev,
    storage.gc,
    tools.tools,
    codec.keygen,
    codec.codec_server,
    session.session,
):
    cli.add_command(_command)


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
