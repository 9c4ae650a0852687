"""Tools for the network ratchet's workflow test: one returns private data."""

from __future__ import annotations

from codemode.activities import tool


@tool(private_data=True)
def patient_record(pid: int) -> dict:
    """A patient's record: private data."""
    return {"pid": pid, "name": "Ada", "diagnosis": "private"}


def public_note(text: str) -> str:
    """Anything public."""
    return text.upper()
