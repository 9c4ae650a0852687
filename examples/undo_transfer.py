"""Undo, worked through (docs/guides/undo.md): a transfer and its refund.

Two transfers run; the payout after them waits for a person, who denies it and rolls the run
back in one decision: both transfers are refunded, newest first, each once. Then a second run
completes, and is rolled back after it ended (a rollback of its own, rollback:ID).

    python -m examples.undo_transfer      # with a server running (codemode server, or TEMPORAL_ADDRESS)
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from codemode import CodeExecutionRequest, CodeModeWorker, connect, start_execution
from codemode.activities import ToolRegistry, current_call, tool
from codemode.activities.tools import compensation
from codemode.client.following import send_decision, wait_for_outcome
from codemode.client.undo import roll_back

#: A toy bank: what it holds, by idempotency key (a real one takes the key with the request).
BANK: dict[str, dict[str, Any]] = {}


def refund(args: dict[str, Any], result: dict[str, Any]) -> None:
    """Pay a transfer back. Runs once per call: its key is <execution>/<call>/compensate."""
    key = current_call().idempotency_key
    if key not in BANK:  # a retry after a lost answer finds it done
        BANK[key] = {"refund_of": result["transfer_id"], "amount": -args["amount"]}


@tool(compensate=compensation(refund, max_attempts=10))
def transfer(to: str, amount: int) -> dict:
    """Move money to an account; a rollback refunds it."""
    key = current_call().idempotency_key
    BANK.setdefault(key, {"to": to, "amount": amount})
    return {"transfer_id": key, "to": to, "amount": amount}


@tool(requires_approval=True, compensate=refund)
def payout(to: str, amount: int) -> dict:
    """A large payment: a person approves it first; a rollback refunds it too."""
    key = current_call().idempotency_key
    BANK.setdefault(key, {"to": to, "amount": amount})
    return {"transfer_id": key, "to": to, "amount": amount}


CODE = """
transfer("acme", 100)
transfer("bolt", 200)
payout("carbon", 5000)
"""


async def main() -> None:
    client = await connect()
    queue = f"undo-{uuid.uuid4().hex[:6]}"
    async with CodeModeWorker(client, ToolRegistry([transfer, payout]), task_queue=queue).running():
        # 1. Deny and roll back, one decision on the waiting payout.
        handle = await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=queue)
        waiting = await wait_for_outcome(handle, until_parked=True)
        (call,) = waiting.pending_approvals
        print("waiting:", call.summary, "| can be undone:", call.can_undo, "| would compensate:", call.would_compensate)
        await send_decision(handle, call.call_id, approve=False, by="ops", comment="wrong batch", rollback=True)
        outcome = await handle.result()
        print("denied and rolled back:", [(e.summary, e.state) for e in reversed(outcome.undo.entries)])
        refunds = [v for v in BANK.values() if "refund_of" in v]
        print("refunds:", [r["amount"] for r in refunds])

        # 2. A run that completed, rolled back afterwards by a run of its own.
        done = await (
            await start_execution(client, CodeExecutionRequest(code='transfer("dune", 7)'), task_queue=queue)
        ).result()
        undone = await roll_back(client, done.execution_id, by="ops", reason="sent twice")
        print(undone.execution_id, [(e.summary, e.state) for e in undone.undo.entries])


if __name__ == "__main__":
    asyncio.run(main())
