"""Following a run at the terminal (``codemode run``): each tool call as it ends and what the
code prints, a person's decisions when the run parks and the terminal is interactive."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import click
from temporalio.client import WorkflowHandle

from codemode.apps.cli.common import os_user
from codemode.apps.command_line import note
from codemode.client import display
from codemode.client.call_progress import ended_calls
from codemode.client.following import PARKED_POLL_MAX_SECONDS, POLL_SECONDS, waiting_status
from codemode.workflows.models import ApproveSignal, DenySignal, ExecutionOutcome, PendingApproval, ToolCallRecord

log = logging.getLogger(__name__)


class Follower:
    """Shows each tool call as it ends and what the code prints, from the run's history (the
    server answers, issue 28), and waits for the outcome. Whether the run waits for a person
    comes from its memo; only then is its worker asked for the calls it waits on (a parked run
    is not about to end: a status query racing a run's end makes the SDK core log "Query not
    found" on the worker, which is this process when the worker runs here)."""

    def __init__(self, handle: WorkflowHandle[Any, ExecutionOutcome], *, as_json: bool, interactive: bool) -> None:
        self.handle = handle
        self.as_json = as_json
        self.interactive = interactive
        self.shown: dict[str, str] = {}
        self.stdout_seen = 0
        self.decided: set[str] = set()

    def show_calls(self, calls: list[ToolCallRecord]) -> None:
        for call in calls:
            showable = call.status in display.FINAL_CALL_STATES or call.status == "awaiting_approval"
            if showable and self.shown.get(call.call_id) != call.status:
                self.shown[call.call_id] = call.status
                note(display.call_line(call))

    def show_stdout(self, stdout: str) -> None:
        """The code's whole output so far: what was not shown yet."""
        if len(stdout) > self.stdout_seen:
            self.show_printed(stdout[self.stdout_seen :])

    def show_printed(self, text: str) -> None:
        """What the code printed next."""
        if not self.as_json:
            click.echo(text, nl=False)
        self.stdout_seen += len(text)

    async def ask(self, pending: list[PendingApproval]) -> None:
        """Interactive terminal: decide each pending call here and now."""
        by = os_user()
        for p in pending:
            if p.call_id in self.decided:
                continue
            ok = await asyncio.to_thread(click.confirm, f"Approve {p.summary or p.tool}?", default=False, err=True)
            self.decided.add(p.call_id)
            if ok:
                await self.handle.signal(
                    "approve", ApproveSignal(call_id=p.call_id, by=by, comment="approved at the terminal")
                )
            else:
                await self.handle.signal("deny", DenySignal(call_id=p.call_id, by=by, reason="denied at the terminal"))

    async def _follow(self) -> None:
        client = self.handle._client
        try:
            async for item in ended_calls(client, self.handle.id, self.handle.run_id):
                if isinstance(item, str):
                    self.show_printed(item)
                else:
                    self.show_calls([item])
        except asyncio.CancelledError:
            pass
        except Exception as err:  # noqa: BLE001 - the outcome shows every call and all the output
            log.debug("following %s stopped: %s", self.handle.id, err)

    async def wait(self) -> ExecutionOutcome | list[PendingApproval]:
        """The outcome, or the pending approvals when the run parks and nobody here can decide."""
        result = asyncio.ensure_future(self.handle.result())
        following = asyncio.ensure_future(self._follow())
        wait = POLL_SECONDS
        try:
            while True:
                done, _ = await asyncio.wait({result}, timeout=wait)
                if done:
                    break
                wait = min(wait * 2, PARKED_POLL_MAX_SECONDS)
                status = await waiting_status(self.handle)
                if status is None:
                    continue
                self.show_calls(status.tool_calls)
                self.show_stdout(status.stdout)
                pending = [p for p in status.pending_approvals if p.call_id not in self.decided]
                if pending:
                    if not self.interactive:
                        return status.pending_approvals
                    await self.ask(pending)
                    wait = POLL_SECONDS
            outcome = result.result()
        finally:
            for pending_task in (result, following):
                if not pending_task.done():
                    pending_task.cancel()
        self.show_calls(outcome.tool_calls)
        self.show_stdout(outcome.stdout)
        return outcome
