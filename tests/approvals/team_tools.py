"""Tools of the approvals-for-teams tests: every run of a tool appends a line to the JSONL file
named by $CODEMODE_TEST_EVENTS, so a test sees whether (and with what) a tool ran."""

from __future__ import annotations

import json
import os

from pydantic import BaseModel

from codemode.activities import current_call, tool

#: Each call of the predicate appends a line here ($CODEMODE_TEST_PREDICATE), so a test sees
#: that a replay never asks it again.
PREDICATE_LOG = "CODEMODE_TEST_PREDICATE"


def _ran(tool_name: str, **arguments: object) -> None:
    path = os.environ.get("CODEMODE_TEST_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"tool": tool_name, "call_id": current_call().call_id, **arguments}) + "\n")


class Receipt(BaseModel):
    to: str
    amount: float


@tool(requires_approval=True)
def send_money(to: str, amount: float) -> Receipt:
    """Sends money: a person approves every call."""
    _ran("send_money", to=to, amount=amount)
    return Receipt(to=to, amount=amount)


def _over_500(arguments: dict) -> bool:
    path = os.environ.get(PREDICATE_LOG)
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(arguments) + "\n")
    return arguments["amount"] > 500


@tool(requires_approval=_over_500)
def pay(to: str, amount: float) -> dict:
    """Pays: a person approves payments over 500 only."""
    _ran("pay", to=to, amount=amount)
    return {"to": to, "amount": amount}


def lookup(city: str) -> str:
    """No approval."""
    return f"{city}: sunny"
