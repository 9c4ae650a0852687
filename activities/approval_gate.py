"""The activity that tells the workflow who may decide one call: the worker reads its
approvers file (each time: an edited file applies to the next call that asks) and evaluates
the policy rules on the call's named arguments. Its result is recorded in the history, so the
check of every decision replays identically and stays verifiable offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.activities import names
from codemode.activities.tools import ToolRegistry
from codemode.approvals import approvers_file as config
from codemode.approvals.gate import ApprovalGate, GateInput

#: Failure type while the approvers file cannot be read: retried until it is fixed (the call
#: keeps waiting; nothing is decided on a broken file).
BROKEN_FILE = "ApproversFileError"


class ApproverActivities:
    """``path``: the approvers file (None: none; decisions are taken as before). ``notify``:
    whether this worker has notify channels (the gate says so to the run)."""

    def __init__(
        self, path: str | os.PathLike[str] | None, registry: ToolRegistry | None = None, *, notify: bool = False
    ) -> None:
        self.path = Path(path) if path else None
        self.registry = registry
        self.notify = notify

    @activity.defn(name=names.APPROVAL_GATE)
    async def gate(self, inp: GateInput) -> ApprovalGate:
        if self.path is None:
            return ApprovalGate(tool=inp.tool, notify=self.notify)
        try:
            file = config.load(self.path)
        except config.ApproversFileError as err:
            raise ApplicationError(str(err), type=BROKEN_FILE) from None
        gate = file.gate(inp.tool, self._named(inp))
        gate.execution_id, gate.call_id, gate.notify = inp.execution_id, inp.call_id, self.notify
        return gate

    def _named(self, inp: GateInput) -> dict[str, Any]:
        """The call's arguments by parameter name (positional ones bound to the tool's
        signature when the registry knows it)."""
        if self.registry is not None and inp.tool in self.registry:
            signature = self.registry[inp.tool].signature
            try:
                bound = signature.bind(inp.args, inp.kwargs)
            except (TypeError, ValueError):
                bound = None
            if bound is not None:
                for p in signature.parameters:  # **flags: its names are arguments too
                    if p.kind == "var_keyword" and isinstance(bound.get(p.name), dict):
                        bound = {**bound.pop(p.name), **bound}
                return bound
        return {**{f"arg{i}": v for i, v in enumerate(inp.args)}, **inp.kwargs}


def resolve_path(approvers: str | os.PathLike[str] | None) -> Path | None:
    """``"env"``: ``CODEMODE_APPROVERS`` (or none); a path: that file, checked now, so a
    worker with a broken file refuses to start instead of leaving calls waiting."""
    if approvers == "env":
        approvers = config.configured_path()
    if not approvers:
        return None
    path = Path(approvers).expanduser().resolve()
    config.load(path)  # raises ApproversFileError
    return path
