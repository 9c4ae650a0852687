"""Tools for the encryption tests: what they return and raise holds marker strings that the
code itself never contains, so finding one in the history means a tool's data leaked."""

from __future__ import annotations

from codemode.activities import tool

#: The markers the tools put in their results and errors (the code never spells them).
RESULT_MARKER = "MRKRESULTq7v"
ERROR_MARKER = "MRKTOOLERRw3k"
#: Half of a big result: over the offload threshold, so it travels through the object store.
BIG_MARKER = "MRKBIGBLOBz5p"


def lookup_customer(name: str) -> dict:
    """A customer record (holds a marker the code never wrote)."""
    return {"name": name, "email": f"{name}@example.com", "note": RESULT_MARKER}


@tool(max_attempts=1)
def charge_card(card: str) -> str:
    """Always declines, with a message holding a marker."""
    raise ValueError(f"card declined: {ERROR_MARKER}")


def big_report(kb: int) -> str:
    """A result of about ``kb`` KB (to cross the external-storage threshold)."""
    return (BIG_MARKER + "-") * (kb * 1024 // (len(BIG_MARKER) + 1))


@tool(requires_approval=True)
def wire_money(to: str, amount: float) -> dict:
    """Needs a person's approval (parks the run)."""
    return {"to": to, "amount": amount, "ok": True}
