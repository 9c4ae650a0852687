"""Tools that move money, for the adversarial corpus (issue 45): each run appends what it
received to $CODEMODE_TEST_EVENTS, so a test sees the exact values that moved."""

from __future__ import annotations

import json
import os
from decimal import Decimal

from pydantic import BaseModel

from codemode.activities import tool


def _moved(tool_name: str, **received: object) -> None:
    path = os.environ.get("CODEMODE_TEST_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"tool": tool_name, **received}, default=str) + "\n")


@tool(requires_approval=True)
def transfer(to: str, amount: int, memo: str = "") -> dict:
    """Moves ``amount`` to ``to``."""
    _moved("transfer", to=to, amount=amount, memo=memo)
    return {"to": to, "amount": amount}


@tool(requires_approval=True)
def payroll(to: list[str], amount: Decimal) -> dict:
    """Pays ``amount`` to each of ``to``."""
    _moved("payroll", to=to, amount=str(amount))
    return {"paid": len(to)}


class Payment(BaseModel):
    to: str
    amount: float


@tool(requires_approval=True)
def pay(payment: Payment, note: str = "") -> dict:
    """Pays one payment (an object argument: rules reach into it, ``payment.amount``)."""
    _moved("pay", to=payment.to, amount=payment.amount)
    return {"to": payment.to}


def _over_500(arguments: dict) -> bool:
    return arguments["amount"] > 500


@tool(requires_approval=_over_500)
def tip(to: str, amount: float) -> dict:
    """A predicate decides who asks: it sees the validated amount."""
    _moved("tip", to=to, amount=amount)
    return {"to": to}


def balance() -> dict:
    """No approval (a value the code may pass on untyped)."""
    return {"amount": "20000", "to": "x@ourco.com"}
