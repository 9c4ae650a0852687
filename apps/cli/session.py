"""``codemode session list|show|close|export``: the sessions a server keeps (cells that share a
namespace; ``codemode run FILE --session NAME`` sends a cell). ``show`` asks the running cell
too: a cell parked on a person's decision reads ``awaiting_approval``, with its calls."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from codemode.apps.cli.common import emit, json_option, open_client
from codemode.apps.command_line import EXIT_OK, Fail, connection_options, note

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.worker.connection import Target
    from codemode.workflows.session_models import CellRecord, SessionStatus


@click.group()
def session() -> None:
    """Sessions: cells that share a namespace (send one with `codemode run FILE --session NAME`)."""


@session.command("list")
@click.option("--open", "only_open", is_flag=True, help="Only sessions that are open.")
@json_option
@connection_options
def list_command(only_open: bool, as_json: bool, target: Target) -> int:
    """The sessions the server knows, newest first."""
    import asyncio

    return asyncio.run(_list(only_open, as_json, target))


async def _list(only_open: bool, as_json: bool, target: Target) -> int:
    from codemode.client.sessions import list_sessions

    client = await open_client(target, quick=True)
    found = await list_sessions(client, include_closed=not only_open)
    if as_json:
        import json

        click.echo(
            json.dumps(
                [
                    {"name": s.name, "status": s.status, "started_at": str(s.started_at), "closed_at": str(s.closed_at)}
                    for s in found
                ]
            )
        )
        return EXIT_OK
    if not found:
        note("No sessions.")
    for s in found:
        state = "open" if s.status == "running" else "closed"
        click.echo(f"{s.name}\t{state}\tstarted {s.started_at:%Y-%m-%d %H:%M:%S}")
    return EXIT_OK


@session.command("show")
@click.argument("name")
@json_option
@connection_options
def show(name: str, as_json: bool, target: Target) -> int:
    """A session's cells (running, waiting, the last ones), its variables and their types."""
    import asyncio

    return asyncio.run(_show(name, as_json, target))


async def _show(name: str, as_json: bool, target: Target) -> int:
    return await show_session(await open_client(target, quick=True), name, as_json=as_json)


async def show_session(client: Client, name: str, *, as_json: bool) -> int:
    """The session as ``session show`` prints it (``status session:NAME`` too, when no cell runs)."""
    status = await _describe(client, name, approvals=True)
    emit(status, show_lines(status), as_json=as_json)
    if status.running is not None and status.running.state == "awaiting_approval" and not as_json:
        cell = status.running.execution_id
        from codemode.client.decision_hints import decide_command

        approve, deny = decide_command("approve", cell, "CALL_ID"), decide_command("deny", cell, "CALL_ID")
        note(f"Decide with: {approve} (or --all), or {deny}")
    return EXIT_OK


def _cell_line(rec: CellRecord) -> str:
    marks = {
        "completed": "✓",
        "failed": "✗",
        "cancelled": "✗",
        "dropped": "-",
        "running": "…",
        "awaiting_approval": "⏸",
        "starting": "…",
        "queued": "⏸",
    }
    text = f"  {marks.get(rec.state, ' ')} cell {rec.index} [{rec.execution_id}] {rec.state}: {rec.summary}"
    if rec.restart:
        text += "  (restart)"
    if rec.error is not None:
        text += f"  — {rec.error.type}: {rec.error.message[:120]}"
    if rec.effect == "rolled_back":
        text += "  (rolled back: the session is as it was before it)"
    if rec.waiting_for:
        text += f"  — waits for {rec.waiting_for}"
    return text


def show_lines(status: SessionStatus) -> list[str]:
    lines = [f"session {status.name}: {status.state} ({status.runtime}), {status.cells} cells"]
    if status.closed_reason:
        lines[0] += f" — {status.closed_reason}"
    earlier = status.cells - len(status.recent) - len(status.queued) - (1 if status.running else 0)
    if earlier > 0:
        lines.append(f"  ({earlier} earlier cells: `codemode history session:{status.name}:N`)")
    lines += [_cell_line(r) for r in status.recent]
    if status.running:
        lines.append(_cell_line(status.running))
    lines += [_cell_line(r) for r in status.queued]
    if status.variables:
        lines.append("  variables:")
        lines += [f"    {k}: {v}" for k, v in status.variables.items()]
    kept = {
        "state": f"its state in the object store ({status.state_bytes} bytes)",
        "live": "a live process on a worker (rebuilt by replaying its cells if that worker goes)",
        "replay": "its cells, replayed when the next cell comes",
        "empty": "nothing yet",
    }[status.kept_as]
    lines.append(f"  kept as: {kept}")
    if status.closes_at:
        lines.append(
            f"  closes when idle at {status.closes_at:%Y-%m-%d %H:%M:%S %Z} (idle timeout {status.idle_timeout})"
        )
    return lines


@session.command("close")
@click.argument("name")
@click.option("--reason", default=None, help="Why (recorded as the session's close reason).")
@connection_options
def close(name: str, reason: str | None, target: Target) -> int:
    """Close a session now: its running cell is cancelled, waiting ones dropped, its state deleted."""
    import asyncio

    return asyncio.run(_close(name, reason, target))


async def _close(name: str, reason: str | None, target: Target) -> int:
    from codemode.client.sessions import InvalidSessionName, SessionError, close_session

    client = await open_client(target, quick=True)
    try:
        summary = await close_session(client, name, reason=reason)
    except (SessionError, InvalidSessionName) as err:
        raise Fail(str(err)) from None
    note(f"session {summary.name} closed after {summary.cells} cells ({summary.closed_reason})")
    return EXIT_OK


@session.command("export")
@click.argument("name")
@click.option("--ipynb", "path", required=True, type=click.Path(dir_okay=False), help="The notebook file to write.")
@connection_options
def export(name: str, path: str, target: Target) -> int:
    """Write a session as a Jupyter notebook: code, output, result and error per cell, the tool
    calls in each cell's metadata (validated with nbformat)."""
    import asyncio

    return asyncio.run(_export(name, Path(path), target))


async def _export(name: str, path: Path, target: Target) -> int:
    from codemode.client.histories.notebook import export_ipynb

    client = await open_client(target, quick=True)
    status = await _describe(client, name)
    count = await export_ipynb(client, status, path)
    note(f"wrote {path} ({count} cells)")
    return EXIT_OK


async def _describe(client: Client, name: str, *, approvals: bool = False) -> SessionStatus:
    from codemode.client.sessions import InvalidSessionName, SessionError, describe_session

    try:
        return await describe_session(client, name, approvals=approvals)
    except (SessionError, InvalidSessionName) as err:
        raise Fail(str(err)) from None
