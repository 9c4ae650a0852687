"""``codemode rollback``: compensate the calls an execution applied (issue 47).

While the run goes on (or waits for a person), its code stops at the next step and it compensates
what it applied; after it ended, a rollback of its own (``rollback:ID``) does, reading what the run
applied from its history. Either way each call that can be undone is compensated once, newest
first (``--parallel``: all at once), and the report says what became of each.

Imports click and ``common`` only at the top (``codemode rollback --help`` is read while a run waits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from codemode.apps.cli.common import json_option, open_client, os_user
from codemode.apps.command_line import EXIT_CODE_ERROR, EXIT_OK, Fail, connection_options, note

if TYPE_CHECKING:
    from codemode.worker.connection import Target


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option("--by", default=None, help="Who asks [default: the OS user]; recorded with the rollback.")
@click.option("--reason", default=None, help="Why, recorded with the rollback.")
@click.option("--parallel", is_flag=True, help="Run the compensations all at once instead of newest first.")
@click.option(
    "--no-wait", "no_wait", is_flag=True, help="Ask for the rollback and return (follow with `codemode result`)."
)
@json_option
@connection_options
def rollback(
    execution_id: str,
    by: str | None,
    reason: str | None,
    parallel: bool,
    no_wait: bool,
    as_json: bool,
    target: Target,
) -> int:
    """Roll an execution back: compensate the calls it applied that can be undone, newest first.

    A run still going stops at its next step (calls that wait are withdrawn); a run that ended is
    rolled back by a run of its own, rollback:ID. A compensation that needs a person waits for an
    approval like any call (codemode approve rollback:ID undo-3). Rolling back again compensates
    only what is left (a failure before, a decision that came later)."""
    import asyncio

    return asyncio.run(_rollback(execution_id, by or os_user(), reason, parallel, no_wait, as_json, target))


async def _rollback(
    execution_id: str, by: str, reason: str | None, parallel: bool, no_wait: bool, as_json: bool, target: Target
) -> int:
    from codemode.client import display
    from codemode.client.undo import RollbackRefused, start_rollback

    client = await open_client(target, quick=True)
    try:
        handle = await start_rollback(
            client, execution_id, by=by, reason=reason, order="parallel" if parallel else "reverse", door="cli"
        )
    except RollbackRefused as err:
        raise Fail(f"{execution_id} cannot be rolled back: {err}") from None
    if no_wait:
        click.echo(f"✓ rollback of {execution_id} asked for; it runs in {handle.id}")
        note(f"Follow it with: codemode result {handle.id}")
        return EXIT_OK
    outcome = await handle.result()
    if as_json:
        click.echo(outcome.model_dump_json())
    else:
        lines = display.undo_lines(outcome.undo) or [f"{execution_id}: nothing to roll back"]
        click.echo("\n".join(lines))
        if handle.id != execution_id:
            note(f"(rolled back by {handle.id}: codemode history {handle.id})")
    log = outcome.undo
    left = [e for e in (log.entries if log else []) if e.state in ("failed", "indeterminate", "applied")]
    return EXIT_CODE_ERROR if left else EXIT_OK
