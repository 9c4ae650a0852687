"""Tools for the MCP server tests: a few hand-written ones (weather, an email that needs
approval, a slow call), and a generated catalog of 300 typed business tools (12 kinds of
record, 25 verbs each), so ``search`` and ``get_schema`` work among hundreds of tools."""

from __future__ import annotations

import asyncio

from codemode.activities import current_call, tool

_WEATHER = {"paris": 18, "london": 14, "tokyo": 24}


def get_weather(city: str) -> dict:
    """Current weather for a city: its temperature in Celsius."""
    try:
        return {"city": city, "temp_c": _WEATHER[city.lower()]}
    except KeyError:
        raise ValueError(f"unknown city: {city}") from None


@tool(requires_approval=True)
def send_email(to: str, subject: str, body: str) -> dict:
    """Send an email message to a recipient. A person approves each one."""
    return {"sent": True, "to": to, "subject": subject, "message_id": current_call().idempotency_key}


async def slow_echo(text: str, seconds: float = 3.0) -> str:
    """Wait a while, then give the text back (for tests that stop things mid-call)."""
    await asyncio.sleep(seconds)
    return text


_RECORDS = {
    "invoice": ("an invoice", "amount_cents: int", "billing, payments and accounts receivable"),
    "customer": ("a customer", "email: str", "people and companies who buy from us"),
    "order": ("a sales order", "quantity: int", "what customers ordered, with line items"),
    "shipment": ("a shipment", "carrier: str", "parcels on their way, tracking numbers"),
    "ticket": ("a support ticket", "priority: str", "helpdesk requests and their replies"),
    "employee": ("an employee", "department: str", "staff records and managers"),
    "repository": ("a code repository", "branch: str", "source code hosting and commits"),
    "calendar_event": ("a calendar event", "starts_at: str", "meetings, attendees and rooms"),
    "document": ("a document", "folder: str", "files, folders and sharing"),
    "product": ("a product", "sku: str", "the catalogue of things we sell, prices and stock"),
    "campaign": ("a marketing campaign", "budget_cents: int", "newsletters, ads and their audiences"),
    "server": ("a cloud server", "region: str", "virtual machines, their disks and networks"),
}
_VERBS = {
    "get": "Fetch one {what} by id",
    "list": "List every {what}, newest first",
    "create": "Create {what}",
    "update": "Change fields of {what}",
    "delete": "Delete {what} for good",
    "archive": "Archive {what} (it can be restored)",
    "restore": "Restore an archived {what}",
    "search": "Find {what} matching a free-text query",
    "export": "Export {what} as CSV",
    "import": "Import {what} from CSV",
    "count": "Count how many of {what} there are",
    "tag": "Add a tag to {what}",
    "untag": "Remove a tag from {what}",
    "assign": "Assign {what} to an owner",
    "comment": "Add a comment to {what}",
    "history": "The change history of {what}",
    "merge": "Merge two duplicates of {what}",
    "duplicate": "Copy {what} into a new one",
    "lock": "Lock {what} against changes",
    "unlock": "Unlock {what} so it can change again",
    "share": "Share {what} with a colleague",
    "watch": "Get notified when {what} changes",
    "validate": "Check {what} for missing or invalid fields",
    "summarize": "A short summary of {what}",
    "link": "Link {what} to another record",
}


def _generated_source() -> str:
    lines = []
    for record, (what, field, about) in _RECORDS.items():
        for verb, text in _VERBS.items():
            doc = f"{text.format(what=what)}. Part of {record.replace('_', ' ')} tools: {about}."
            lines += [
                f"def {verb}_{record}({record}_id: str, {field} | None = None, note: str = '') -> dict:",
                f"    {doc!r}",
                f"    return {{'tool': '{verb}_{record}', 'id': {record}_id}}",
                "",
            ]
    return "\n".join(lines)


#: Defined here (not imported), so the registry takes them as this module's tools.
exec(compile(_generated_source(), __file__ + ":generated", "exec"), globals())  # noqa: S102

GENERATED = [f"{verb}_{record}" for record in _RECORDS for verb in _VERBS]
