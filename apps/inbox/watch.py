"""Telling a console when a call begins to wait for a person and when it is decided, with the
call's page in the inbox: what ``codemode dev`` prints, so the person at its terminal finds
the call. It reads what the inbox's list reads (the visibility index, every ``every``
seconds), then the history of a call that stopped waiting, for who decided it and how."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote

from temporalio.client import Client

from codemode.apps.inbox import data
from codemode.apps.inbox.wording import decision_sentence

#: Seconds between two looks at what waits.
EVERY = 2.0
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def page_of(base_url: str, row: data.PendingRow) -> str:
    """The call's page: the one the run's memo names, else this inbox's."""
    return row.inbox_url or f"{base_url}/calls/{quote(row.execution_id, safe='')}/{quote(row.call_id, safe='')}"


async def watch_calls(client: Client, base_url: str, say: Callable[[str], None], every: float = EVERY) -> None:
    """Say each call that begins to wait, and how each was decided, until cancelled."""
    known: dict[tuple[str, str], data.PendingRow] = {}
    while True:
        try:
            rows = await data.pending_calls(client)
        except Exception:  # noqa: BLE001 - the server restarting: look again later
            rows = None
        if rows is not None:
            now = {(r.execution_id, r.call_id): r for r in rows}
            for key, row in sorted(now.items(), key=lambda kv: kv[1].asked_at or _EARLIEST):
                if key not in known:
                    say(f"⏸ {row.summary or row.tool} waits for a person (call {row.call_id} of {row.execution_id})")
                    say(f"  decide at {page_of(base_url, row)}")
            for key, row in known.items():
                if key not in now:
                    say(await _ended(client, base_url, row))
            known = now
        await asyncio.sleep(every)


async def _ended(client: Client, base_url: str, row: data.PendingRow) -> str:
    """How a call that stopped waiting was decided (or why nobody did)."""
    view = None
    with contextlib.suppress(Exception):  # a run deleted in between: say what we know
        view = await data.call_view(client, row.execution_id, row.call_id)
    what = row.summary or row.tool
    page = page_of(base_url, row)
    if view is None or view.call is None or view.call.approval is None:
        how = view.run_state if view is not None else "stopped waiting"
        return f"• {what}: no decision ({how}) — {page}"
    mark = "✗" if view.call.approval.decision == "denied" else "✓"
    return f"{mark} {what}: {decision_sentence(view.call.approval)} — {page}"
