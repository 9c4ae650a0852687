"""The activity that tells the workflow who may decide one call: the worker reads its
approvers file (each time: an edited file applies to the next call that asks) and evaluates
the policy rules on the call's validated arguments (the values the tool receives). Its result
is recorded in the history, so the check of every decision replays identically and stays
verifiable offline.

Fail closed across workers (issue 45): a run that saw an approvers file pins its SHA-256 and
sends it with every later gate (``GateInput.pinned``). A worker without the file, or with
another one that does not supersede it, does not answer for that run: it fails the attempt
(logging why) and the retry goes to another worker, until one with the pinned file answers or
the run refuses the call. A worker without a file also stays silent for a run that pinned
nothing while a worker with a file polls the same task queue (``approvers_peers.py``). A
recheck (``GateInput.recheck``: decisions judged again as they arrive) takes any worker with a
file: the run counts a decision only when both the call's gate and the recheck allow it."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.activities import approvers_peers, names
from codemode.activities.tools import COMPENSATE_PREFIX, ToolRegistry
from codemode.approvals import approvers_file as config
from codemode.approvals.gate import TOOL_DOC_LIMIT, ApprovalGate, GateInput

log = logging.getLogger(__name__)

#: Failure type while the approvers file cannot be read: retried until it is fixed (the call
#: keeps waiting; nothing is decided on a broken file).
BROKEN_FILE = "ApproversFileError"
#: Failure types of a worker that must not answer for the run (retried: another worker may).
FILE_MISSING = "ApproversFileMissing"
FILE_DIFFERS = "ApproversFileDiffers"


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
            await self._without_a_file(inp)
            return self._described(ApprovalGate(tool=inp.tool, notify=self.notify), inp)
        try:
            file = config.load(self.path)
        except config.ApproversFileError as err:
            raise ApplicationError(str(err), type=BROKEN_FILE) from None
        pinned = inp.pinned
        if pinned and inp.recheck is None and file.sha256 != pinned and pinned not in file.supersedes:
            why = (
                f"this worker's approvers file {self.path} (sha256 {file.sha256[:16]}…) is not the one execution "
                f"{inp.execution_id} pinned (sha256 {pinned[:16]}…), and does not supersede it: leaving call "
                f"{inp.call_id} to a worker with the pinned file (or list the old hash in `supersedes`)"
            )
            log.warning("%s", why)
            raise ApplicationError(why, type=FILE_DIFFERS)
        received, unvalidated = self._received(inp)
        gate = _gate(file, inp.tool, received, unvalidated)
        gate.execution_id, gate.call_id, gate.notify = inp.execution_id, inp.call_id, self.notify
        if inp.strict:
            person, how = gate.authenticate_start(
                inp.started_by, inp.start_signature, inp.execution_id, inp.code_sha256
            )
            gate.starter, gate.starter_how = person, how
            if person is None and inp.started_by:
                gate.starter_claimed = file.person(inp.started_by) or inp.started_by
        return self._described(gate, inp)

    def _described(self, gate: ApprovalGate, inp: GateInput) -> ApprovalGate:
        """The gate with what a person deciding is shown: the call's inbox page, the tool's doc."""
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

    async def _without_a_file(self, inp: GateInput) -> None:
        """Refuse to answer "no approvers file" where that would weaken a run: it pinned one,
        or a worker with a file polls this task queue."""
        if inp.pinned or inp.recheck is not None:
            why = (
                f"this worker has no approvers file, and execution {inp.execution_id} pinned one (sha256 "
                f"{(inp.pinned or '?')[:16]}…): leaving call {inp.call_id} to a worker that has it"
            )
            log.warning("%s", why)
            raise ApplicationError(why, type=FILE_MISSING)
        try:
            info = activity.info()
            others = await approvers_peers.differing(activity.client(), info.task_queue, "none")
        except RuntimeError:  # not in an activity with a client (a test calling it directly)
            others = {}
        if others:
            why = (
                f"this worker has no approvers file, while workers of task queue {activity.info().task_queue} have "
                f"one: {approvers_peers.describe(others)}; leaving call {inp.call_id} of {inp.execution_id} to them"
            )
            log.warning("%s", why)
            raise ApplicationError(why, type=FILE_MISSING)

    def _received(self, inp: GateInput) -> tuple[dict[str, Any], str]:
        """The call's arguments as the tool receives them (validated by its schema), and why
        not when they cannot be had (then no ``allow`` rule can match)."""
        if inp.tool == config.CODE_TOOL:
            return {"code": inp.args[0] if inp.args else "", **{f"arg{i}": v for i, v in enumerate(inp.args)}}, ""
        tool = inp.tool.removeprefix(COMPENSATE_PREFIX)  # a compensation's: its call's (issue 47)
        if self.registry is None or tool not in self.registry:
            return {
                **{f"arg{i}": v for i, v in enumerate(inp.args)},
                **inp.kwargs,
            }, "this worker does not know the tool"
        try:
            return self.registry[tool].received(inp.args, inp.kwargs), ""
        except (TypeError, ValueError) as err:
            return {}, f"{type(err).__name__}: {err}"


def _gate(file: config.ApproversFile, tool: str, named: dict[str, Any], unvalidated: str = "") -> ApprovalGate:
    """The file as it applies to a call of ``tool``. A compensation (``compensate:<tool>``, issue
    47) is decided under a rule that names it (``[tools."compensate:transfer"]``) when the file has
    one, else under its tool's own rule: whoever may approve a transfer may approve its refund."""
    base = tool.removeprefix(COMPENSATE_PREFIX)
    if base == tool or file.rule_for(tool)[0].startswith("tools."):
        return file.gate(tool, named, unvalidated=unvalidated)
    gate = file.gate(base, named, unvalidated=unvalidated)
    gate.tool = tool
    return gate


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
