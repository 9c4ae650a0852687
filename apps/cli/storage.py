"""``codemode gc``: the retention sweep of the object store, run now (the worker's hourly
Schedule runs the same sweep)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from codemode.activities.retention import SweepInput, SweepReport, sweep
from codemode.apps.cli.common import emit, json_option, open_client, open_store
from codemode.apps.command_line import EXIT_OK, Duration, connection_options

if TYPE_CHECKING:
    from codemode.worker.connection import Target


@click.command()
@click.option(
    "--keep",
    type=Duration(allow_zero=True),
    default=None,
    help="Keep what an execution stored this long after it closes [default: the namespace's retention].",
)
@click.option("--dry-run", is_flag=True, help="Say what would be deleted; delete nothing.")
@json_option
@connection_options
def gc(keep: timedelta | None, dry_run: bool, as_json: bool, target: Target) -> int:
    """Delete what closed executions stored (payloads, checkpoints) past retention."""
    return asyncio.run(_gc(keep, dry_run, as_json, target))


async def _gc(keep: timedelta | None, dry_run: bool, as_json: bool, target: Target) -> int:
    client = await open_client(target)
    store = await open_store()
    report = await sweep(client, store, SweepInput(namespace=client.namespace, keep=keep, dry_run=dry_run))
    emit(report, _lines(report, store.location()), as_json=as_json)
    return EXIT_OK


def _lines(report: SweepReport, where: str) -> list[str]:
    verb = "would delete" if report.dry_run else "deleted"
    lines = [
        f"{where}: {verb} the objects of {len(report.deleted)} execution(s) closed more than {report.keep} ago"
        + ("" if report.dry_run else f" ({report.objects_deleted} objects)"),
    ]
    lines += [f"  {verb}: {e}" for e in report.deleted]
    if report.kept:
        lines.append(f"kept {len(report.kept)} running or recently closed execution(s)")
    return lines
