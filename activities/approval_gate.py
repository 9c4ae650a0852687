"""The activity that tells the workflow who may decide one call: the worker reads its
approvers file (each time: an edited file applies to the next call that asks) and evaluates
the policy rules on the call's named arguments. Its result is recorded in the history, so the
check of every decision replays identically and stays verifiable offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.activities import names
from codemode.activities.tools import ToolRegistry
from codemode.approvals import approvers_file as config
from codemode.approvals.gate import TOOL_DOC_LIMIT, ApprovalGate, GateInput

#: Failure type while the approvers file cannot be read: retried until it is fixed (the call
#: keeps waiting; nothing is decided on a broken file).
BROKEN_FILE = "ApproversFileError"


class ApproverActivities:
    """``path``: the approvers file (None: none; decisions are taken as before). ``notify``:
    whether this worker has notify channels (the gate says so to the run). ``inbox_url``: the
    approvals inbox people decide at (the notify config's), whose page of the call the gate
    names."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None,
        registry: ToolRegistry | None = None,
        *,
        notify: bool = False,
        inbox_url: str | None = None,
    ) -> None:
        self.path = Path(path) if path else None
        self.registry = registry
        self.notify = notify
        self.inbox_url = (inbox_url or "").rstrip("/")

    @activity.defn(name=names.APPROVAL_GATE)
    async def gate(self, inp: GateInput) -> ApprovalGate:
        if self.path is None:
            gate = ApprovalGate(tool=inp.tool, notify=self.notify)
        else:
            try:
                file = config.load(self.path)
            except config.ApproversFileError as err:
                raise ApplicationError(str(err), type=BROKEN_FILE) from None
            gate = file.gate(inp.tool, self._named(inp))
            gate.execution_id, gate.call_id, gate.notify = inp.execution_id, inp.call_id, self.notify
        gate.inbox_url, gate.tool_doc = self._page(inp), self._doc(inp.tool)
        return gate

    def _page(self, inp: GateInput) -> str:
        """The inbox's page of the call ("" without an inbox)."""
        if not self.inbox_url:
            return ""
        return f"{self.inbox_url}/calls/{quote(inp.execution_id, safe='')}/{quote(inp.call_id, safe='')}"

    def _doc(self, tool: str) -> str:
        """What the tool does, as its docstring (or its server's description) says."""
        if self.registry is None or tool not in self.registry:
            return ""
        doc = self.registry[tool].signature.description.strip()
        return doc if len(doc) <= TOOL_DOC_LIMIT else doc[: TOOL_DOC_LIMIT - 1] + "…"

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
