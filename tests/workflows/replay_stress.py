"""The approval-run stress harness (issue 43): every approval path, on a worker that may keep no
workflow cached, with decisions and status queries arriving at chosen moments, activities slow
on purpose, and the machine loaded; it counts what must never happen.

What it counts, per run and in all:

* **nondeterminism**: a workflow task failed with TMPRL1100 (in the history), a ``status`` query
  that failed on replay, or a history that does not replay against the code at the end (the
  SDK's ``Replayer`` under our workflow runner);
* **lost decisions**: a call that ``status`` showed waiting, that the person decided, and that
  ended without a decision (timed out), or kept the run waiting past its deadline;
* **stuck**: a run still open past its deadline (a decision lost, a task failing forever);
* **wrong ends**: an outcome other than the scenario's (a tool that ran twice counts too).

Timing that decides an interleaving is made deterministic with ``SlowActivities``: an activity
interceptor that delays the first attempt of the named activities (local ones too), so a
notification's start can finish after the step that follows it, or a gate's completion can land
in the same workflow task as the person's signal, every time instead of one time in fifty.

Used by ``tests/workflows/test_replay_stress.py`` (a few runs of each deterministic order) and
``bench/approval_replay.py`` (hundreds of runs, cached and uncached, under load).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle, WorkflowHistory, WorkflowQueryFailedError
from temporalio.service import RPCError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Replayer,
    Worker,
)

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.worker.plugin import CodeModePlugin
from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import (
    Answer,
    ApproveSignal,
    CodeExecutionRequest,
    Decision,
    DenySignal,
    ExecutionStatus,
    PendingApproval,
)

TOOLS_MODULE = "tests.workflows.tools_under_test"
NONDETERMINISM = "TMPRL1100"


# -- activities slow on purpose -------------------------------------------------------------


class _SlowInbound(ActivityInboundInterceptor):
    def __init__(self, nxt: ActivityInboundInterceptor, delays: dict[str, float]) -> None:
        super().__init__(nxt)
        self._delays = delays

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        delay = self._delays.get(info.activity_type)
        if delay and info.attempt == 1:
            await asyncio.sleep(delay)
        return await super().execute_activity(input)


class SlowActivities(Interceptor):
    """Delays the first attempt of each named activity (``{"codemode.notify.start": 2.0}``);
    the delays can change between runs (``set``)."""

    def __init__(self, delays: dict[str, float] | None = None) -> None:
        self.delays: dict[str, float] = dict(delays or {})

    def set(self, delays: dict[str, float]) -> None:
        self.delays.clear()
        self.delays.update(delays)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _SlowInbound(next, self.delays)


@contextlib.contextmanager
def slow_local_resolutions(seconds: float) -> Any:
    """The workflow thread takes ``seconds`` to take in each local activity's result (live, not on
    replay): the window in which Core holds an LA's resolution for the workflow while a query
    comes in. Core then completes the workflow task with the LA's marker and forces a new one
    for what the workflow does next (``managed_run.rs``: "pending LA resolutions, and we're
    responding to a query"): live, the code after the LA runs in the next task; on replay, in
    the task of the marker. A harness-only patch of the SDK's instance (restored on exit)."""
    from temporalio.worker import _workflow_instance

    impl = _workflow_instance._WorkflowInstanceImpl
    original = impl._apply_resolve_activity

    def slow(self: Any, job: Any) -> None:
        if job.is_local and not self._is_replaying and seconds:
            time.sleep(seconds)
        original(self, job)

    impl._apply_resolve_activity = slow  # type: ignore[method-assign]
    try:
        yield
    finally:
        impl._apply_resolve_activity = original  # type: ignore[method-assign]


@contextlib.contextmanager
def slow_queries(seconds: float) -> Any:
    """The workflow thread takes ``seconds`` to answer each query (live): a local activity that
    finishes meanwhile has its resolution pending when Core answers the query, so Core completes
    the task with the LA's marker and hands the resolution to the next task (the order a busy
    worker gets by chance, made certain). A harness-only patch of the SDK's instance."""
    from temporalio.worker import _workflow_instance

    impl = _workflow_instance._WorkflowInstanceImpl
    original = impl._apply_query_workflow

    def slow(self: Any, job: Any) -> None:
        if seconds:
            time.sleep(seconds)
        original(self, job)

    impl._apply_query_workflow = slow  # type: ignore[method-assign]
    try:
        yield
    finally:
        impl._apply_query_workflow = original  # type: ignore[method-assign]


# -- scenarios --------------------------------------------------------------------------------

#: (handle, call id, who): a person's decision on one call. The harness's person decides as
#: ``SEEN`` once ``status`` showed the call, as ``BLIND`` before (``Timing.early_after``).
Decide = Callable[[WorkflowHandle, str, str], Awaitable[Any]]
SEEN, BLIND = "alice", "blind"


class Signer:
    """A person of the approvers file (``Setup.approvers``): signals carry their signature over
    the call ``status`` showed (so only sight decisions, by signal, are made signed)."""

    def __init__(self, person: Any) -> None:
        self.person = person
        self.calls: dict[tuple[str, str], PendingApproval] = {}

    def signature(self, handle: WorkflowHandle, call_id: str, decision: str) -> Any:
        call = self.calls.get((handle.id, call_id))
        return self.person.sign(handle.id, call, decision) if call is not None else None


#: The signer of the runs under way, by execution id (set by ``run_one``).
SIGNERS: dict[str, Signer] = {}


async def approve(handle: WorkflowHandle, call_id: str, by: str) -> None:
    signer = SIGNERS.get(handle.id)
    signature = signer.signature(handle, call_id, "approve") if signer else None
    await handle.signal("approve", ApproveSignal(call_id=call_id, by=by, signature=signature))


async def deny(handle: WorkflowHandle, call_id: str, by: str) -> None:
    signer = SIGNERS.get(handle.id)
    signature = signer.signature(handle, call_id, "deny") if signer else None
    await handle.signal("deny", DenySignal(call_id=call_id, by=by, reason="no", signature=signature))


async def decide_update(handle: WorkflowHandle, call_id: str, by: str) -> None:
    await handle.execute_update("decide", Decision(call_id=call_id, approve=True, by=by))


async def edit(handle: WorkflowHandle, call_id: str, by: str) -> None:
    await handle.execute_update(
        "decide", Decision(call_id=call_id, approve=True, by=by, arguments={"amount": 4}, door="cli")
    )


async def answer(handle: WorkflowHandle, call_id: str, by: str) -> None:
    await handle.execute_update(
        "decide", Decision(call_id=call_id, approve=True, by=by, answer=Answer(value={"ref": "r"}), door="cli")
    )


@dataclass(frozen=True)
class Scenario:
    """One approval path: the code (made new for every run), how a person decides, and what the
    outcome must be."""

    name: str
    code: str
    decide: Decide | None = approve
    #: Calls that wait for a person (so a blind early decision knows their ids).
    calls: int = 1
    success: bool = True
    output: Any = None
    runtime: str = "monty"
    code_review: bool = False
    #: Seconds a call waits before it times out (expiry scenarios).
    approval_timeout: float = 300.0
    #: Tool runs (the events file's "start" events) the run must make.
    tool_runs: int | None = None

    @property
    def signable(self) -> bool:
        """Its decisions are signals, which the harness can sign (an approvers file in force)."""
        return self.decide in (approve, deny, None)

    def request(self, n: int) -> CodeExecutionRequest:
        # New code on every execution (agents never send the same code twice).
        return CodeExecutionRequest(
            code=f"{self.code}\n# run {n} {uuid.uuid4().hex[:8]}",
            runtime=self.runtime,
            require_code_approval=self.code_review,
            approval_timeout=timedelta(seconds=self.approval_timeout),
        )


GATHER3 = "import asyncio\nr = await asyncio.gather(wire('a', 1), wire('b', 2), wire('c', 3))\n[x['to'] for x in r]"

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario("one", "transfer('bob', 1)['to']", output="bob", tool_runs=1),
        Scenario(
            "sequence",
            "a = transfer('ann', 1)\nb = slow_step(2, 0.01)\nc = transfer('cy', 3)\n[a['to'], b, c['to']]",
            calls=2,
            output=["ann", 20, "cy"],
            tool_runs=3,
        ),
        Scenario("gathered", GATHER3, calls=3, output=["a", "b", "c"], tool_runs=3),
        Scenario(
            "gathered_mixed",
            "import asyncio\nr = await asyncio.gather(wire('a', 1), fetch(1), wire('b', 2), fetch(2))\n"
            "[r[0]['to'], r[1], r[2]['to'], r[3]]",
            calls=2,
            output=["a", 101, "b", 102],
            tool_runs=4,
        ),
        Scenario("code", "lookup('Rome')['city']", code_review=True, output="Rome", tool_runs=0),
        Scenario("decided", "transfer('ann', 2)['to']", decide=decide_update, output="ann", tool_runs=1),
        Scenario("edit", "transfer('kim', 5)['amount']", decide=edit, output=4, tool_runs=1),
        Scenario("answer", "transfer('lou', 6)['ref']", decide=answer, output="r", tool_runs=0),
        Scenario(
            "deny",
            "try:\n    transfer('eve', 1)\n    r = 'ran'\nexcept PermissionError as e:\n    r = 'denied'\nr",
            decide=deny,
            output="denied",
            tool_runs=0,
        ),
        Scenario(
            "expiry",
            "try:\n    transfer('max', 1)\n    r = 'ran'\nexcept PermissionError:\n    r = 'expired'\nr",
            decide=None,
            approval_timeout=1.0,
            output="expired",
            tool_runs=0,
        ),
        Scenario("python_one", "transfer('bob', 1)['to']", runtime="python", output="bob", tool_runs=1),
        Scenario("python_gathered", GATHER3, runtime="python", calls=3, output=["a", "b", "c"], tool_runs=3),
    ]
}


# -- one run ------------------------------------------------------------------------------------


@dataclass
class Timing:
    """When the person acts: ``sight`` decides each call when ``status`` first shows it waiting;
    ``early`` also sends a blind decision for each call after ``early_after`` seconds (before its
    wait may have begun); ``hammer`` queries ``status`` without pause alongside."""

    early_after: float | None = None
    hammer: bool = False
    poll: float = 0.02


@dataclass
class RunReport:
    scenario: str
    execution_id: str
    seconds: float
    ended: str  # completed | failed | stuck | error
    problems: list[str] = field(default_factory=list)
    nondeterminism: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    history: WorkflowHistory | None = None


async def _status(handle: WorkflowHandle, errors: list[str]) -> ExecutionStatus | None:
    try:
        return await handle.query("status", result_type=ExecutionStatus)
    except WorkflowQueryFailedError as err:
        errors.append(f"status query failed: {err}")
    except RPCError as err:  # a query while the run closes, or a worker that is restarting
        # (and the server refusing more queries than a busy run takes: "consistent query buffer
        # is full", from the harness's own query storm, not the run's doing)
        if "not found" not in str(err).lower() and "query buffer is full" not in str(err):
            errors.append(f"status query: {err}")
    return None


async def _hammer(handle: WorkflowHandle, errors: list[str], stop: asyncio.Event) -> None:
    while not stop.is_set():
        await _status(handle, errors)
        await asyncio.sleep(0)


async def run_one(
    client: Client,
    task_queue: str,
    scenario: Scenario,
    n: int,
    timing: Timing,
    *,
    deadline: float = 60.0,
    signer: Signer | None = None,
) -> RunReport:
    """Start one execution of ``scenario`` and act as its person until it ends (or ``deadline``
    seconds pass): the report of what happened. With ``signer`` (an approvers file in force)
    the decisions are signed, and made once ``status`` shows the call (never blind)."""
    began = time.monotonic()
    handle = await start_execution(client, scenario.request(n), task_queue=task_queue)
    if signer is not None:
        SIGNERS[handle.id] = signer
        timing = Timing(early_after=None, hammer=timing.hammer, poll=timing.poll)
    query_errors: list[str] = []
    stop = asyncio.Event()
    hammer = asyncio.create_task(_hammer(handle, query_errors, stop)) if timing.hammer else None
    decided: set[str] = set()
    early: asyncio.Task[None] | None = None
    if timing.early_after is not None and scenario.decide is not None:
        ids = ["code"] if scenario.code_review else [str(i) for i in range(1, scenario.calls + 1)]

        async def blind() -> None:
            await asyncio.sleep(timing.early_after or 0)
            for cid in ids:
                with contextlib.suppress(Exception):  # a refused Update is the run's answer
                    await scenario.decide(handle, cid, BLIND)  # type: ignore[misc]

        early = asyncio.create_task(blind())
    ended = "stuck"
    try:
        while time.monotonic() - began < deadline:
            desc = await handle.describe()
            if desc.status is not None and desc.status.name != "RUNNING":
                ended = desc.status.name.lower()
                break
            status = await _status(handle, query_errors)
            if status is not None and scenario.decide is not None:
                for pending in status.pending_approvals:
                    if pending.call_id in decided:
                        continue
                    if timing.early_after is not None and early is not None and not early.done():
                        break  # the blind decisions go first
                    decided.add(pending.call_id)
                    if signer is not None:
                        signer.calls[(handle.id, pending.call_id)] = pending
                    try:
                        await scenario.decide(handle, pending.call_id, SEEN)
                    except Exception as err:  # noqa: BLE001 - counted as a problem below
                        query_errors.append(f"deciding call {pending.call_id} failed: {err}")
            await asyncio.sleep(timing.poll)
    finally:
        stop.set()
        SIGNERS.pop(handle.id, None)
        for task in (hammer, early):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
    report = RunReport(scenario.name, handle.id, time.monotonic() - began, ended)
    report.history = await handle.fetch_history()
    for event in report.history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            message = event.workflow_task_failed_event_attributes.failure.message
            (report.nondeterminism if NONDETERMINISM in message else report.problems).append(
                f"workflow task failed: {message[:300]}"
            )
    for err in query_errors:
        (report.nondeterminism if NONDETERMINISM in err else report.problems).append(err)
    if ended == "completed":
        outcome = await handle.result()
        if outcome.success != scenario.success or (scenario.output is not None and outcome.output != scenario.output):
            report.problems.append(f"ended {outcome.success} with {outcome.output!r} ({outcome.error})")
        # A call the person decided (once status showed it waiting) that ended undecided.
        report.lost = [
            f"call {r.call_id}: {r.approval.decision if r.approval else 'no decision'}"
            for r in outcome.tool_calls
            if r.call_id in decided and (r.approval is None or r.approval.decision == "timed_out")
        ]
    elif ended == "stuck":
        status = await _status(handle, query_errors)
        if status is not None:
            waiting = [p.call_id for p in status.pending_approvals]
            report.lost = [f"call {c} still waits though decided" for c in waiting if c in decided]
            report.problems.append(f"still waiting after {deadline:g}s: calls {waiting}, state {status.state}")
        with contextlib.suppress(Exception):
            await handle.terminate("stress harness: stuck")
    else:
        report.problems.append(f"the workflow ended {ended}")
    return report


# -- many runs --------------------------------------------------------------------------------


def tool_starts(events_file: Path) -> Counter[tuple[str, str]]:
    """How many times each (execution, call) started a tool (the events file of tools_under_test)."""
    seen: Counter[tuple[str, str]] = Counter()
    if not events_file.exists():
        return seen
    for line in events_file.read_text().splitlines():
        if line.strip():
            event = json.loads(line)
            if event["event"] == "start":
                seen[(event["execution_id"], event["call_id"])] += 1
    return seen


async def replay_failures(client: Client, histories: Sequence[WorkflowHistory]) -> dict[str, str]:
    """Every history against the code as it is now: workflow id -> why it failed."""

    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in histories:
            yield history

    replayer = Replayer(
        workflows=[CodeExecutionWorkflow],
        data_converter=client.data_converter,
        workflow_runner=CodeModeWorkflowRunner(),
    )
    results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
    return {wid: str(err) for wid, err in results.replay_failures.items()}


@dataclass
class Totals:
    runs: int = 0
    nondeterminism: int = 0
    lost: int = 0
    stuck: int = 0
    wrong: int = 0
    twice: int = 0
    replay: int = 0
    seconds: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)

    def add(self, report: RunReport) -> None:
        self.runs += 1
        self.seconds.append(report.seconds)
        self.nondeterminism += bool(report.nondeterminism)
        self.lost += bool(report.lost)
        self.stuck += report.ended == "stuck"
        self.wrong += bool(report.problems) and report.ended != "stuck"
        for text in [*report.nondeterminism, *report.lost, *report.problems][:2]:
            if len(self.examples) < 12:
                self.examples.append(f"{report.scenario} {report.execution_id}: {text}")

    @property
    def clean(self) -> bool:
        return not (self.nondeterminism or self.lost or self.stuck or self.wrong or self.twice or self.replay)

    def line(self) -> str:
        mean = sum(self.seconds) / len(self.seconds) if self.seconds else 0.0
        p95 = sorted(self.seconds)[int(0.95 * (len(self.seconds) - 1))] if self.seconds else 0.0
        return (
            f"{self.runs} runs: {self.nondeterminism} nondeterministic, {self.lost} lost decisions, "
            f"{self.stuck} stuck, {self.wrong} wrong ends, {self.twice} tools run twice, "
            f"{self.replay} histories that do not replay; {mean:.2f} s mean, {p95:.2f} s p95 per run"
        )


@contextlib.asynccontextmanager
async def stress_worker(
    client: Client,
    task_queue: str,
    *,
    cached: bool,
    slow: SlowActivities,
    notify: Any = None,
    approvers: Any = None,
) -> AsyncIterator[Worker]:
    """A worker of the test tools; ``cached=False`` keeps no workflow (every task replays)."""
    plugin = CodeModePlugin(ToolRegistry.from_module(TOOLS_MODULE), notify=notify, approvers=approvers)
    kwargs: dict[str, Any] = {} if cached else {"max_cached_workflows": 0}
    async with Worker(client, task_queue=task_queue, plugins=[plugin], interceptors=[slow], **kwargs) as worker:
        yield worker


@dataclass
class Plan:
    """One batch of runs: which scenarios, how slow which activities, when people act."""

    scenarios: Sequence[str]
    delays: dict[str, float] = field(default_factory=dict)
    timing: Timing = field(default_factory=Timing)
    runs: int = 1
    concurrency: int = 1
    #: Sign the decisions (the worker has an approvers file naming this person's key).
    signer: Signer | None = None


async def run_plan(
    client: Client, task_queue: str, plan: Plan, slow: SlowActivities, totals: Totals, *, seed: int = 0
) -> list[RunReport]:
    slow.set(plan.delays)
    rng = random.Random(seed)
    counter = itertools.count()
    names = [n for n in plan.scenarios if plan.signer is None or SCENARIOS[n].signable]
    todo = [names[i % len(names)] for i in range(plan.runs)]
    rng.shuffle(todo)
    reports: list[RunReport] = []
    gate = asyncio.Semaphore(plan.concurrency)

    async def one(name: str) -> None:
        async with gate:
            report = await run_one(client, task_queue, SCENARIOS[name], next(counter), plan.timing, signer=plan.signer)
            reports.append(report)
            totals.add(report)

    await asyncio.gather(*(one(name) for name in todo))
    return reports


def check_tools_once(reports: Sequence[RunReport], events_file: Path, totals: Totals) -> None:
    """Each run's tools ran the expected number of times, each call at most once."""
    starts = tool_starts(events_file)
    for report in reports:
        mine = {call: n for (xid, call), n in starts.items() if xid == report.execution_id}
        twice = [call for call, n in mine.items() if n > 1]
        scenario = SCENARIOS[report.scenario]
        if twice or (
            report.ended == "completed" and scenario.tool_runs is not None and len(mine) != scenario.tool_runs
        ):
            totals.twice += 1
            if len(totals.examples) < 12:
                totals.examples.append(f"{report.scenario} {report.execution_id}: tool starts {mine}")


def cpu_load(processes: int) -> contextlib.AbstractContextManager[None]:
    """``processes`` busy loops for the duration (the machine loaded as CI's is)."""
    import multiprocessing

    @contextlib.contextmanager
    def load() -> Any:
        procs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(processes)]
        for p in procs:
            p.start()
        try:
            yield
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.join()

    return load()


def _spin() -> None:
    os.nice(5)
    while True:
        pass
