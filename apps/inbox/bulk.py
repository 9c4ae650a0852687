"""Deciding several waiting calls at once, from the list: the person selects calls, says
approve or deny (a reason for a denial), confirms once (the page's script asks in a dialog;
without it, a page lists the calls and asks), and each call is then decided on its own, exactly
as from its page: signed by the inbox on the person's behalf when it has a key, counted by the
approvers file's rules, refused with its own reason when it cannot be applied."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web
from temporalio.client import Client

from codemode.apps.inbox import data, views
from codemode.apps.inbox.auth import InboxAuth
from codemode.apps.inbox.signing import SigningRefused, sign_for_person
from codemode.apps.inbox.wording import refusal
from codemode.client.following import DecisionRefused, send_decision
from codemode.workflows.models import Decision

if TYPE_CHECKING:
    from codemode.client.signing import Signer

#: Calls decided in one go at most.
MAX_SELECTED = 100


async def decide_selected(
    client: Client, auth: InboxAuth, signer: Signer | None, request: web.Request, identity: str
) -> web.StreamResponse:
    """The list's bulk form: a confirmation page (unless confirmed), then each call decided."""
    form = await request.post()
    if not auth.check_csrf(identity, str(form.get("csrf", ""))):
        return views.message(
            "Refused",
            "This form is stale or did not come from the inbox: reload the page.",
            status=403,
            identity=identity,
        )
    action = str(form.get("action", ""))
    comment = str(form.get("comment", "")).strip()[:2000] or None
    keys = list(dict.fromkeys(str(k) for k in form.getall("call", [])))[:MAX_SELECTED]
    if action not in ("approve", "deny") or not keys:
        text = "Select the calls to decide (the boxes at the left of each), then approve or deny them."
        return views.message("Nothing was decided", text, status=400, identity=identity, kind="error")
    if action == "deny" and not comment:
        text = "Say why they are denied (the field between the buttons): the code of each run sees the reason."
        return views.message("Nothing was decided", text, status=400, identity=identity, kind="error")
    waiting = {r.key: r for r in await data.pending_calls(client)}
    rows = [waiting.get(k) or _gone(k) for k in keys]
    common: dict[str, Any] = {"identity": identity, "action": action, "comment": comment, "rows": rows}
    if form.get("confirm") != "yes":  # one confirmation (the script's dialog sends it already)
        return views.page(
            "bulk.html", title="Confirm", csrf=auth.csrf(identity), signed=signer is not None, results=None, **common
        )
    results = []
    for row in rows:
        results.append((row, *await _decide(client, signer, row, action == "approve", identity, comment)))
    done = sum(1 for _, ok, _ in results if ok)
    return views.page("bulk.html", title="Decided", results=results, done=done, **common)


def _gone(key: str) -> data.PendingRow:
    execution_id, _, call_id = key.rpartition("/")
    return data.PendingRow(
        execution_id, call_id, tool="", summary=f"call {call_id} of {execution_id}", asked_at=None, deadline=None
    )


async def _decide(
    client: Client, signer: Signer | None, row: data.PendingRow, approve: bool, by: str, comment: str | None
) -> tuple[bool, str]:
    """(decided, what happened) for one call."""
    decision = Decision(call_id=row.call_id, approve=approve, by=by, comment=comment, door="inbox")
    handle = client.get_workflow_handle(row.execution_id)
    try:
        await sign_for_person(handle, decision, signer)
        record = await send_decision(handle, decision)
    except (DecisionRefused, SigningRefused) as err:
        return False, f"Nothing was decided: {refusal(str(err))}"
    if record is None:
        return (
            True,
            f"{'Approved' if approve else 'Denied'} as {by}; no worker runs now: it takes effect when one starts.",
        )
    if record.decision == "counted":
        return True, f"Your approval is counted; the call needs {record.needed} more."
    return True, f"{record.decision.capitalize()} as {by}."
