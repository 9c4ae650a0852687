"""Saved snippets in the sandbox steps: the first step loads the ones the code calls and stores
their prelude under the execution (its hash goes into the history); a replay, or a step whose
sandbox lost it, loads it back by that hash. Workflow code never reads the store: it only
passes the reference on."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from temporalio.exceptions import ApplicationError

from codemode.approvals.approvers_file import ApproversFileError
from codemode.runtimes import CodeRuntime
from codemode.runtimes.prelude import Prelude

from ..checkpoints import CheckpointScope, CheckpointUnusable
from ..models import CheckpointRef, StartInput
from ..records import ErrorInfo, SnippetUse
from ..tools import BUILTINS, ToolSpec
from .calls import SnippetCalls
from .compose import referenced, tools_reached
from .loading import load_snippets
from .models import SnippetError, signature_hash

#: Preludes kept in memory by their hash (a few KB each).
PRELUDE_CACHE = 64
#: The kind of a stored prelude under its execution (beside ``cp`` checkpoints, ``seg`` segments).
KIND = "pre"


@dataclass
class StartPlan:
    prelude: Prelude | None = None
    ref: CheckpointRef | None = None
    uses: list[SnippetUse] = field(default_factory=list)
    tools_seen: dict[str, str] = field(default_factory=dict)


class SnippetSteps:
    def __init__(self, calls: SnippetCalls, checkpoints: object) -> None:
        self.calls = calls
        self.checkpoints = checkpoints  # CheckpointStore
        self._cache: OrderedDict[str, Prelude] = OrderedDict()

    async def start(
        self, inp: StartInput, runtime: CodeRuntime, specs: dict[str, ToolSpec], scope: CheckpointScope
    ) -> StartPlan | ErrorInfo:
        """What the first step starts the code with, or the in-band error that refuses a snippet."""
        tools = {n: s.signature for n, s in specs.items() if n not in BUILTINS}
        plan = StartPlan(tools_seen={t: signature_hash(tools[t]) for t in tools_reached(inp.code, tools)})
        try:
            loaded = await load_snippets(
                inp.code,
                library=self.calls.library(scope.namespace),
                runtime=runtime,
                specs=specs,
                pins=inp.snippets,
                inputs=inp.inputs,
                approvers=self.calls.approvers,
            )
        except (SnippetError, ApproversFileError) as err:
            return ErrorInfo(type="SnippetError", message=str(err), kind="snippet")
        if loaded is not None:
            plan.prelude, plan.uses = loaded.prelude, loaded.uses
            plan.ref = await self.checkpoints.save(scope, loaded.prelude.model_dump_json().encode(), kind=KIND)  # type: ignore[attr-defined]
            self._remember(plan.ref, loaded.prelude)
        return plan

    async def load(self, scope: CheckpointScope, ref: CheckpointRef | None) -> Prelude | None:
        """The run's prelude from its reference (verified against its hash)."""
        if ref is None:
            return None
        cached = self._cache.get(ref.sha256)
        if cached is not None:
            self._cache.move_to_end(ref.sha256)
            return cached
        try:
            blob = await self.checkpoints.load(scope, ref, kind=KIND)  # type: ignore[attr-defined]
        except CheckpointUnusable as err:  # like the journal's segments: nothing to fall back on
            raise ApplicationError(
                f"the run's saved snippets cannot be loaded back: {err}", type="StateLost", non_retryable=True
            ) from None
        prelude = Prelude.model_validate_json(blob)
        self._remember(ref, prelude)
        return prelude

    def _remember(self, ref: CheckpointRef, prelude: Prelude) -> None:
        self._cache[ref.sha256] = prelude
        while len(self._cache) > PRELUDE_CACHE:
            self._cache.popitem(last=False)


def refused_in_cell(code: str) -> ErrorInfo | None:
    """Saved snippets are not offered to a session's cells (yet): say so before anything runs."""
    try:
        names = referenced(code)
    except SnippetError as err:
        return ErrorInfo(type="SnippetError", message=str(err), kind="snippet")
    if not names:
        return None
    return ErrorInfo(
        type="SnippetError",
        message=f"saved snippets ({', '.join(names)}) cannot be called from a session's cell yet: "
        "run the code as an execution of its own",
        kind="snippet",
    )
