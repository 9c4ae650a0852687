"""``CodeSessionWorkflow``: one long-lived workflow per session; each cell its own execution.

The shape (issue 21). A session is an ordered series of cells sharing a namespace. Its
workflow (id ``session:NAME``) receives cells by the Update ``submit`` (validated before
anything is written: a closed session, another runtime or a full queue is refused with
no history event), queues them, and runs them strictly one at a time in submission order,
each as a child ``CodeExecutionWorkflow`` (id ``session:NAME:N``). So every cell keeps
what an execution has: its own audit (``codemode history``), approvals, status, retries
and replay; a cell parked on an approval simply holds the cells behind it. A cell
waiting its turn is in the session's ``describe`` query with what it waits for.

The session's state never enters the history: the workflow holds references only, and
hands each cell where the session is (``CellStart``): the dump after the previous cell
(monty: the VM's session state; e2b: the paused sandbox), or a worker's live process
(python), plus the recipe that rebuilds it exactly when neither is usable (each earlier
cell's code and its tool results in the store, replayed under the session's seed and
clock). The cell's execution returns where the session is after it (``CellEnd``).

Lifetime: with no cell for ``idle_timeout`` the session closes and deletes what it stored
(the retention sweep removes anything left later). ``close`` closes it at once (the
running cell is cancelled, queued ones dropped), and so does cancelling its workflow: a
session that a workflow started as its child (``workflows/child_session.py``) ends with
that workflow. A long session continues as new between cells, carrying references and a
bounded status (``SessionCarry``).

Workflows cannot send Updates: a workflow sends a cell by the signal ``enqueue`` with a
request id of its own and its workflow id, and the session answers it by the signal
``codemode_cell_reply`` (a ``CellReply``: the outcome, or why there is none) when the cell
ends, or at once when it refuses the cell. A request id seen before is not queued again.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.models import (
        CellRecipe,
        CellStart,
        CheckpointRef,
        SegmentRef,
        SessionRecipe,
        SessionRecipeInput,
        SessionRecipeRefs,
        SessionScope,
    )
    from codemode.activities.records import ErrorInfo
    from codemode.runtimes.types import Determinism
    from codemode.workflows.execution_workflow import CodeExecutionWorkflow
    from codemode.workflows.models import RUNTIME_KEY, STATUS_KEY, ExecutionOutcome
    from codemode.workflows.session_models import (
        CELL_REPLY_SIGNAL,
        ENQUEUE_SIGNAL,
        MAX_QUEUED,
        RECENT_CELLS,
        REMEMBERED_REQUESTS,
        SESSION_WORKFLOW_TYPE,
        CellRecord,
        CellReply,
        CellSubmission,
        CellTicket,
        QueuedCell,
        SessionCarry,
        SessionStart,
        SessionState,
        SessionStatus,
        SessionSummary,
        WorkflowCell,
        cell_execution_id,
    )
    from codemode.workflows.session_release import release_state, release_when_idle
    from codemode.workflows.summary import execution_details, plain, summary_text
    from codemode.workflows.versions import Versions

#: Recipe entries (and code characters) a session carries inline before it stores them.
RECIPE_INLINE = 32
RECIPE_INLINE_CHARS = 32 * 1024
#: Our own ceilings for one run (the server suggests continuing as new sooner).
MAX_RUN_EVENTS = 10_000
MAX_RUN_BYTES = 10 * 1024 * 1024
#: Answers to workflows a session keeps in memory, for a cell sent again after it ended.
KEPT_REPLIES = 8


@workflow.defn(name=SESSION_WORKFLOW_TYPE)
class CodeSessionWorkflow:
    @workflow.init
    def __init__(self, start: SessionStart, carry: SessionCarry | None = None) -> None:
        self._versions = Versions()
        self._versions.begin()  # first (workflows/versions.py): patches are read nowhere else
        # Here, not in run(): the first cell's Update (update-with-start) is handled before run() starts.
        if not isinstance(start, SessionStart):  # started with one argument: it arrives as JSON
            start = SessionStart.model_validate(start)
        self._start = start
        self._name = start.name
        self._runtime = start.runtime
        self._idle = start.idle_timeout
        self._state: SessionState = "open"
        self._closed_reason: str | None = None
        self._count = 0
        self._queue: list[QueuedCell] = []
        self._running: CellRecord | None = None
        self._child: workflow.ChildWorkflowHandle | None = None
        self._recent: list[CellRecord] = []
        self._runs: list[str] = []
        self._determinism: Determinism | None = None
        self._restarts = 0
        #: Where the session is between cells (references only).
        self._state_ref: CheckpointRef | None = None
        self._live: tuple[str, str | None] | None = None
        #: The state's sandbox keeps running while idle: the grace period and why (released
        #: after it, ``session_release.py``); and why the next cell replays, once it was.
        self._idle_sandbox: tuple[float, str] | None = None
        self._replay_reason: str | None = None
        self._recipe_segments: list[SegmentRef] = []
        self._recipe: list[CellRecipe] = []
        self._variables: dict[str, str] = {}
        self._last_active: datetime | None = None
        #: Live processes whose worker said it let them go.
        self._lost: list[str] = []
        #: Cells sent by workflows: request id -> cell number (the latest ones), and the
        #: latest answers sent (for a request sent again after its cell ended).
        self._requests: dict[str, int] = {}
        self._replies: list[CellReply] = []
        if carry is not None:
            self._restore(carry)
        else:
            self._determinism = _new_determinism()
            self._last_active = workflow.now()

    # -- messages ---------------------------------------------------------------------------

    @workflow.update(
        description="Queue a cell; returns its number and execution id (it runs after the cells before it)."
    )
    def submit(self, cell: CellSubmission) -> CellTicket:
        # Answered at once: with nothing before it, the same workflow task that accepts the
        # cell starts its execution (the caller finds it a moment later, by its id).
        return self._accept(QueuedCell(record=CellRecord(index=0, execution_id=""), request=cell.request))

    def _accept(self, queued: QueuedCell) -> CellTicket:
        self._count += 1
        index = self._count
        execution_id = cell_execution_id(self._name, index)
        ahead = len(self._queue) + (1 if self._running is not None else 0)
        queued.record = CellRecord(
            index=index,
            execution_id=execution_id,
            summary=_first_line(queued.request.code),
            restart=queued.request.restart,
        )
        self._queue.append(queued)
        return CellTicket(session=self._name, index=index, execution_id=execution_id, ahead=ahead)

    @submit.validator
    def _validate_submit(self, cell: CellSubmission) -> None:
        if self._state != "open":
            raise ApplicationError(
                f"session {self._name!r} is closed ({self._closed_reason or 'closing'}); start a new session",
                type="SessionClosed",
            )
        if cell.request.runtime != self._runtime:
            raise ApplicationError(
                f"session {self._name!r} runs on {self._runtime}; this cell asks for {cell.request.runtime}",
                type="RuntimeMismatch",
            )
        if cell.request.network == "ratchet":
            # A rebuilt session replays its cells' private results without cutting the network
            # first, so the ratchet's promise would not hold across a rebuild: refused for now.
            raise ApplicationError(
                "sessions do not support network='ratchet' yet; use network='none' (the default)",
                type="SessionUnsupported",
            )
        if len(self._queue) >= MAX_QUEUED:
            raise ApplicationError(
                f"session {self._name!r} already has {len(self._queue)} cells waiting; send more once they ran",
                type="SessionBusy",
            )

    @workflow.signal(
        name=ENQUEUE_SIGNAL,
        description="Queue a cell sent by a workflow (workflows cannot send Updates); the session answers "
        "the sender with the signal codemode_cell_reply when the cell ends, or at once if it refuses it.",
    )
    async def enqueue(self, cell: WorkflowCell) -> None:
        index = self._requests.get(cell.request_id)
        if index is not None:  # sent again: it runs once, and its answer stands
            kept = next((r for r in self._replies if r.request_id == cell.request_id), None)
            if kept is not None:
                await self._send_reply(cell.reply_to, kept)
            elif not any(q.record.index == index for q in self._queue) and (
                self._running is None or self._running.index != index
            ):
                await self._send_reply(
                    cell.reply_to,
                    CellReply(
                        request_id=cell.request_id,
                        session=self._name,
                        index=index,
                        execution_id=cell_execution_id(self._name, index),
                        state="refused",
                        error=ErrorInfo(
                            type="DuplicateCell",
                            message=f"request {cell.request_id} already ran as cell {index}: its outcome is "
                            f"the result of execution {cell_execution_id(self._name, index)}",
                            kind="sandbox",
                        ),
                    ),
                )
            return  # (queued or running: the answer comes when it ends)
        try:
            self._validate_submit(CellSubmission(request=cell.request))
        except ApplicationError as err:
            await self._send_reply(
                cell.reply_to,
                CellReply(
                    request_id=cell.request_id,
                    session=self._name,
                    state="refused",
                    error=ErrorInfo(type=err.type or "SessionError", message=err.message, kind="sandbox"),
                ),
            )
            return
        queued = QueuedCell(
            record=CellRecord(index=0, execution_id=""),
            request=cell.request,
            reply_to=cell.reply_to,
            request_id=cell.request_id,
        )
        self._accept(queued)
        self._requests[cell.request_id] = queued.record.index
        while len(self._requests) > REMEMBERED_REQUESTS:
            del self._requests[next(iter(self._requests))]

    @workflow.update(
        description="Close the session now: cancel the running cell, drop the queued ones, delete its state."
    )
    def close(self, reason: str | None = None) -> SessionStatus:
        if self._state == "open":
            self._begin_close(reason or "closed on request")
        return self.describe()

    @workflow.signal(description="A worker let the session's live process go (it shut down).")
    def live_lost(self, key: str) -> None:
        # (It may come before the end of the cell that left that process: remember it.)
        self._lost = [*self._lost, key][-16:]
        if self._live is not None and self._live[0] == key:
            self._live = None

    @workflow.query
    def describe(self) -> SessionStatus:
        queued = []
        before = self._running
        for q in self._queue:
            rec = q.record.model_copy()
            if before is not None:
                rec.waiting_for = f"cell {before.index} ({before.execution_id}, {before.state})"
            before = q.record
            queued.append(rec)
        kept_as = "empty"
        if self._live is not None:
            kept_as = "live"
        elif self._state_ref is not None:
            kept_as = "state"
        elif self._recipe or self._recipe_segments:
            kept_as = "replay"
        closes_at = self._last_active + self._idle if self._last_active and self._state == "open" else None
        return SessionStatus(
            name=self._name,
            runtime=self._runtime,
            state=self._state,
            cells=self._count,
            running=self._running,
            queued=queued,
            recent=list(self._recent),
            variables=dict(self._variables),
            kept_as=kept_as,
            state_bytes=self._state_ref.size if self._state_ref else 0,
            restarts=self._restarts,
            idle_timeout=self._idle,
            last_active=self._last_active,
            closes_at=closes_at if self._running is None and not self._queue else None,
            closed_reason=self._closed_reason,
            runs=len(self._runs) + 1,
        )

    # -- the run ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: SessionStart, carry: SessionCarry | None = None) -> SessionSummary:
        start = self._start
        cell: asyncio.Task[None] | None = None
        try:
            while True:
                if not self._queue and self._state == "open" and self._idle_sandbox and self._state_ref:
                    await self._release_when_idle()
                if not self._queue and self._state == "open":
                    assert self._last_active is not None
                    left = self._last_active + self._idle - workflow.now()
                    try:
                        await workflow.wait_condition(
                            lambda: bool(self._queue) or self._state != "open",
                            timeout=max(left, timedelta(seconds=1)),
                            timeout_summary="the session closes when idle",
                        )
                    except TimeoutError:
                        self._begin_close(f"idle for {_human(self._idle)}")
                if self._state != "open":
                    break
                # The cell runs in a task of its own: a cancellation of this workflow reaches
                # this loop (which closes the session) instead of being spent on the cell's
                # child, which the session cancels itself.
                cell = asyncio.create_task(self._run_and_answer(self._queue.pop(0)))
                await workflow.wait([cell])
                cell = None
                self._last_active = workflow.now()
                # Between cells. (A submit waiting for its cell to start is answered first.)
                if self._should_roll_over() and workflow.all_handlers_finished():
                    await self._roll_over(start)
        except asyncio.CancelledError:
            # Cancelled: the workflow that started this session closed (a session started as
            # a child ends with its parent), or someone cancelled it. It closes like any other.
            if self._state == "open":
                parent = workflow.info().parent
                self._begin_close(f"its workflow {parent.workflow_id} ended" if parent else "cancelled")
            if cell is not None:
                await workflow.wait([cell])
        for queued in self._queue:  # closed with cells still waiting: they never run
            queued.record.state = "dropped"
            self._remember(queued.record)
            await self._answer(queued, None)
        self._queue.clear()
        await workflow.wait_condition(workflow.all_handlers_finished)
        await release_state(self._runtime, self._live, self._state_ref, everything=True)  # all it stored
        self._state = "closed"
        return SessionSummary(name=self._name, cells=self._count, closed_reason=self._closed_reason or "closed")

    def _begin_close(self, reason: str) -> None:
        self._state = "closing"
        self._closed_reason = reason
        if self._child is not None:
            self._child.cancel()

    async def _run_and_answer(self, queued: QueuedCell) -> None:
        outcome = await self._run_cell(queued)
        await self._answer(queued, outcome)

    async def _run_cell(self, queued: QueuedCell) -> ExecutionOutcome | None:
        req, record = queued.request, queued.record
        record.state = "starting"
        self._running = record
        if req.restart:
            await release_state(self._runtime, self._live, self._state_ref, everything=False)
            self._state_ref, self._live, self._idle_sandbox = None, None, None
            self._recipe, self._recipe_segments, self._variables = [], [], {}
            self._determinism = _new_determinism()
            self._restarts += 1
        info = workflow.info()
        assert self._determinism is not None
        cell = CellStart(
            scope=SessionScope(session_id=info.workflow_id, first_run_id=info.first_execution_run_id),
            index=record.index,
            determinism=self._determinism,
            state=self._state_ref,
            live=self._live[0] if self._live else None,
            live_queue=self._live[1] if self._live else None,
            recipe_segments=list(self._recipe_segments),
            recipe=list(self._recipe),
            replay_reason=self._replay_reason,
        )
        attributes = None
        if req.index_search_attributes:
            attributes = TypedSearchAttributes(
                [SearchAttributePair(STATUS_KEY, "running"), SearchAttributePair(RUNTIME_KEY, req.runtime)]
            )
        try:
            self._child = await workflow.start_child_workflow(
                CodeExecutionWorkflow.run,
                req.model_copy(update={"cell": cell}),
                id=record.execution_id,
                task_queue=info.task_queue,
                search_attributes=attributes,
                static_summary=plain(f"cell {record.index} of session {self._name}: {summary_text(req)}"),
                static_details=execution_details(req),
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
            )
        except WorkflowAlreadyStartedError as err:  # the id is taken (by a cell of an older session)
            queued.started = True
            record.state, record.effect = "failed", "none"
            record.error = ErrorInfo(type=type(err).__name__, message=str(err), kind="sandbox")
            self._finish(record)
            return None
        queued.started = True
        record.state = "running"
        if self._state != "open":  # it closed while the cell was starting
            self._child.cancel()
        try:
            outcome: ExecutionOutcome = await self._child
        except ChildWorkflowError as err:
            record.state = "cancelled" if isinstance(err.cause, CancelledError) else "failed"
            record.effect = "rolled_back"
            record.error = ErrorInfo(
                type=type(err.cause or err).__name__, message=str(err.cause or err), kind="sandbox"
            )
            self._live = None  # whatever the cell held live is gone with it; the state stays
            self._finish(record)
            return None
        finally:
            self._child = None
        record.state = "completed" if outcome.success else "failed"
        record.error = outcome.error.model_copy(update={"traceback": None}) if outcome.error else None
        end = outcome.cell
        if end is not None:
            record.effect = end.effect
            if end.effect == "rolled_back":
                self._live = None
            else:
                self._state_ref = end.state
                self._idle_sandbox = (end.release_after, end.running_why or "") if end.release_after else None
                self._replay_reason = None
                self._live = (end.live, end.live_queue) if end.live and end.live not in self._lost else None
                self._variables = dict(end.variables)
                if end.effect == "kept":
                    self._recipe.append(
                        CellRecipe(
                            code=req.code,
                            inputs=req.inputs,
                            tools=req.tools,
                            journal=end.journal,
                            raised=not outcome.success,
                        )
                    )
                    if (
                        len(self._recipe) >= RECIPE_INLINE
                        or sum(len(c.code) for c in self._recipe) > RECIPE_INLINE_CHARS
                    ):
                        await self._store_recipe()
        else:
            record.effect = "none"
        self._finish(record)
        return outcome

    # -- answers to workflows that sent cells -------------------------------------------------

    async def _answer(self, queued: QueuedCell, outcome: ExecutionOutcome | None) -> None:
        """Tell the workflow that sent this cell how it ended (cells sent by Update: nothing)."""
        if queued.reply_to is None or queued.request_id is None:
            return
        record = queued.record
        error = record.error if outcome is None else None
        if outcome is None and record.state == "dropped":
            error = ErrorInfo(
                type="SessionClosed",
                message=f"session {self._name!r} closed before cell {record.index} ran ({self._closed_reason})",
                kind="sandbox",
            )
        reply = CellReply(
            request_id=queued.request_id,
            session=self._name,
            index=record.index,
            execution_id=record.execution_id,
            state=record.state,
            outcome=outcome,
            error=error,
        )
        self._replies = [*self._replies, reply][-KEPT_REPLIES:]
        await self._send_reply(queued.reply_to, reply)

    async def _send_reply(self, to: str, reply: CellReply) -> None:
        try:
            await workflow.get_external_workflow_handle(to).signal(CELL_REPLY_SIGNAL, reply)
        except FailureError as err:  # the sender is gone (it closed): nobody to tell
            workflow.logger.info("could not answer %s about cell %s: %s", to, reply.index, err)

    async def _store_recipe(self) -> None:
        """Move the recipe of the latest cells to the store (every cell's start carries the
        recipe: it must stay small)."""
        info = workflow.info()
        refs = await workflow.execute_local_activity(
            names.SESSION_SAVE_RECIPE,
            SessionRecipeInput(
                scope=SessionScope(session_id=info.workflow_id, first_run_id=info.first_execution_run_id),
                segments=self._recipe_segments,
                recipe=SessionRecipe(cells=self._recipe),
            ),
            result_type=SessionRecipeRefs,
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(minutes=1)),
            summary="store the recipe of the latest cells",
        )
        self._recipe_segments, self._recipe = list(refs.segments), []

    def _finish(self, record: CellRecord) -> None:
        self._running = None
        self._remember(record)

    def _remember(self, record: CellRecord) -> None:
        self._recent = [*self._recent, record][-RECENT_CELLS:]

    def _restore(self, carry: SessionCarry) -> None:
        self._count = carry.count
        self._runs = list(carry.runs)
        self._determinism = carry.determinism
        self._restarts = carry.restarts
        self._state_ref = carry.state
        self._idle_sandbox = (carry.release_after, carry.running_why or "") if carry.release_after else None
        self._replay_reason = carry.replay_reason
        self._live = (carry.live, carry.live_queue) if carry.live else None
        self._recipe_segments = list(carry.recipe_segments)
        self._recipe = list(carry.recipe)
        self._variables = dict(carry.variables)
        self._queue = list(carry.queue)
        self._recent = list(carry.recent)
        self._last_active = carry.last_active
        self._requests = dict(carry.requests)

    # -- continue-as-new ----------------------------------------------------------------------

    def _should_roll_over(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() > MAX_RUN_EVENTS
            or info.get_current_history_size() > MAX_RUN_BYTES
        )

    async def _roll_over(self, start: SessionStart) -> None:
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._state != "open":
            return  # closing: finish here
        if self._recipe:  # the recipe so far goes to the store: the carry stays small
            await self._store_recipe()
        assert self._determinism is not None and self._last_active is not None
        carry = SessionCarry(
            count=self._count,
            runs=[*self._runs, workflow.info().run_id],
            determinism=self._determinism,
            restarts=self._restarts,
            state=self._state_ref,
            release_after=self._idle_sandbox[0] if self._idle_sandbox else None,
            running_why=self._idle_sandbox[1] if self._idle_sandbox else None,
            replay_reason=self._replay_reason,
            live=self._live[0] if self._live else None,
            live_queue=self._live[1] if self._live else None,
            recipe_segments=self._recipe_segments,
            recipe=self._recipe,
            variables=self._variables,
            queue=self._queue,
            recent=self._recent,
            last_active=self._last_active,
            requests=self._requests,
        )
        workflow.continue_as_new(args=[start, carry])

    # -- the state --------------------------------------------------------------------------

    async def _release_when_idle(self) -> None:
        """Idle with a sandbox that keeps running: release it after the grace period (the
        next cell then rebuilds the session by replaying its cells)."""
        assert self._idle_sandbox is not None and self._state_ref is not None and self._last_active is not None
        why = await release_when_idle(
            self._runtime,
            self._state_ref,
            self._idle_sandbox,
            last_active=self._last_active,
            idle_timeout=self._idle,
            busy=lambda: bool(self._queue) or self._state != "open",
            versions=self._versions,
        )
        if why is not None:
            self._state_ref, self._idle_sandbox, self._replay_reason = None, None, why


def _new_determinism() -> Determinism:
    """The seed and clock of a session (a restart gets new ones, like a fresh interpreter)."""
    return Determinism(seed=workflow.random().getrandbits(63), epoch=workflow.now().timestamp())


def _first_line(code: str) -> str:
    for line in code.splitlines():
        if line.strip():
            text = line.strip()
            return text if len(text) <= 80 else text[:77] + "..."
    return "(empty)"


def _human(span: timedelta) -> str:
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
