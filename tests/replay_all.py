"""The net under the suite (issue 43): every workflow history the tests made on a dev server is
replayed against the code as it is at the end, before that server stops. A history that does
not replay fails the run, naming the test that made it and its workflow and run ids.

How: ``codemode.worker.dev_server.start_local_environment`` is wrapped (``track``) before any
test module imports it, so every server a test process starts (the session's, a module's, one a
test starts itself) replays its histories in ``shutdown``. Each test's time window is kept
(``TestWindows``): a run is the test's whose window holds its start. A test that makes histories
on purpose that cannot replay (a workflow changed under a running execution) says so with
``@pytest.mark.no_replay("why")``. Histories of workflow types this package cannot import here
(a framework's agent workflow in another environment) are counted, not replayed.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory

#: Set to 0 to skip the net (a quick local run).
ENV = "CODEMODE_REPLAY_ALL"
#: A folder: every history that does not replay is written there as JSON (to read its events).
DUMP_ENV = "CODEMODE_REPLAY_DUMP"
#: A replay that fails for one of these could not read the history's payloads here (a test's own
#: object store or S3 driver, keys this process does not hold, payloads a retention test deleted
#: on purpose): counted as unreadable, not as a history that does not replay.
UNREADABLE = (
    "StorageDriver retrieve failed",
    "No driver found with name",
    "Failed decoding arguments",
    "Failed decoding",
    "Unknown encryption key",
    "cannot decrypt",
)
#: The SDK drops a signal whose input this process cannot convert (a test's own codec or keys),
#: with only a log line: the replay then diverges where the signal decided something. Such a
#: run is counted as unreadable too (``DroppedSignals``), never as a history that does not replay.
DROPPED_SIGNAL = "Failed deserializing signal input"


class DroppedSignals(logging.Handler):
    """The run ids whose signals the SDK dropped as unreadable while replaying."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.runs: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if DROPPED_SIGNAL in message and " and run ID " in message:
            self.runs.add(message.split(" and run ID ", 1)[1].split(",", 1)[0].strip())


@dataclass
class Window:
    nodeid: str
    start: float
    end: float | None = None
    exempt: str | None = None


@dataclass
class TestWindows:
    windows: list[Window] = field(default_factory=list)

    def begin(self, nodeid: str, exempt: str | None) -> None:
        self.windows.append(Window(nodeid, time.time(), exempt=exempt))

    def end(self) -> None:
        if self.windows and self.windows[-1].end is None:
            self.windows[-1].end = time.time()

    def at(self, when: datetime) -> Window | None:
        t = when.timestamp()
        for w in reversed(self.windows):
            if w.start - 0.5 <= t and (w.end is None or t <= w.end + 0.5):
                return w
        return None


WINDOWS = TestWindows()


@dataclass
class Failure:
    test: str
    workflow_id: str
    run_id: str
    why: str
    #: The history's events, one short word each (``events_in_brief``): the CI log alone shows
    #: the shape of a run that did not replay.
    events: str = ""

    def __str__(self) -> str:
        brief = f"\n    events: {self.events}" if self.events else ""
        return f"{self.test}: {self.workflow_id} (run {self.run_id}): {self.why[:400]}{brief}"


def events_in_brief(history: WorkflowHistory) -> str:
    """``1:Started 2:TaskScheduled ... 36:TimerCanceled(1)``: each event's number and type, with
    the activity, timer, marker, signal or update it names."""
    from google.protobuf.json_format import MessageToDict

    out = []
    for event in history.events:
        data = MessageToDict(event)
        kind = data.get("eventType", "").removeprefix("EVENT_TYPE_").title().replace("_", "")
        kind = kind.removeprefix("WorkflowExecution").removeprefix("Workflow") or kind
        attrs = next((v for k, v in data.items() if k.endswith("Attributes")), {})
        what = (
            attrs.get("activityType", {}).get("name")
            or attrs.get("timerId")
            or attrs.get("markerName")
            or attrs.get("signalName")
            or attrs.get("acceptedRequest", {}).get("input", {}).get("name")
            or attrs.get("timeoutType")
            or attrs.get("cause")
            or ("continued" if attrs.get("continuedExecutionRunId") else None)
        )
        out.append(f"{event.event_id}:{kind}" + (f"({what})" if what else ""))
    return " ".join(out)


@dataclass
class Summary:
    replayed: int = 0
    exempt: int = 0
    unreadable: int = 0
    unknown_types: dict[str, int] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    seconds: float = 0.0


#: Every server's summary, for the session's report (``tests/conftest.py``).
SUMMARIES: list[Summary] = []


def workflow_classes() -> dict[str, type]:
    """Workflow type name -> class: ours, and the tests' own that start executions or sessions.
    (An agent framework's workflows need that framework's plugin to replay: counted, not replayed.)"""
    from temporalio.workflow import _Definition

    from codemode.workflows.execution_workflow import CodeExecutionWorkflow
    from codemode.workflows.notify_workflow import CodeModeNotifyWorkflow
    from codemode.workflows.session_workflow import CodeSessionWorkflow
    from codemode.workflows.sweep_workflow import SandboxSweepWorkflow, StorageSweepWorkflow

    classes: list[type] = [
        CodeExecutionWorkflow,
        CodeSessionWorkflow,
        CodeModeNotifyWorkflow,
        StorageSweepWorkflow,
        SandboxSweepWorkflow,
    ]
    for module, names in (
        ("tests.sessions.session_parent", ("SessionParentWorkflow",)),
        ("tests.workflows.user_workflows", None),
    ):
        try:
            mod = __import__(module, fromlist=["*"])
        except ImportError:
            continue
        for value in vars(mod).values():
            if isinstance(value, type) and _Definition.from_class(value) is not None:
                if names is None or value.__name__ in names:
                    classes.append(value)
    out: dict[str, type] = {}
    for cls in classes:
        defn = _Definition.from_class(cls)
        if defn is not None and defn.name:
            out[defn.name] = cls
    return out


async def replay_everything(client: Client, windows: TestWindows = WINDOWS) -> Summary:
    """Replay every workflow history on ``client``'s namespace with the code as it is now."""
    from temporalio.worker import Replayer

    from codemode.worker.workflow_runner import CodeModeWorkflowRunner

    began = time.monotonic()
    summary = Summary()
    classes = workflow_classes()
    runs: list[tuple[Any, Window | None]] = []
    async for wf in client.list_workflows():
        window = windows.at(wf.start_time) if wf.start_time else None
        if window is not None and window.exempt:
            summary.exempt += 1
            continue
        if wf.workflow_type not in classes:
            summary.unknown_types[wf.workflow_type] = summary.unknown_types.get(wf.workflow_type, 0) + 1
            continue
        runs.append((wf, window))

    by_run: dict[str, tuple[Any, Window | None]] = {wf.run_id: (wf, window) for wf, window in runs}

    async def histories() -> AsyncIterator[WorkflowHistory]:
        for wf, _ in runs:
            try:
                yield await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
            except Exception:  # noqa: BLE001 - gone (retention) or the server is stopping
                continue

    replayer = Replayer(
        workflows=list(classes.values()),
        data_converter=client.data_converter,
        workflow_runner=CodeModeWorkflowRunner(),
    )
    dropped = DroppedSignals()
    sdk_log = logging.getLogger("temporalio.worker._workflow_instance")
    sdk_log.addHandler(dropped)
    try:
        results = await replayer.replay_workflows(histories(), raise_on_replay_failure=False)
    finally:
        sdk_log.removeHandler(dropped)
    summary.replayed = len(runs)
    dump = os.environ.get(DUMP_ENV)
    for run_id, err in results.replay_failures.items():
        wf, window = by_run.get(run_id, (None, None))
        if run_id in dropped.runs or any(marker in str(err) for marker in UNREADABLE):
            summary.unreadable += 1
            continue
        events = ""
        if wf is not None:
            try:
                history = await client.get_workflow_handle(wf.id, run_id=run_id).fetch_history()
                events = events_in_brief(history)
                if dump:
                    Path(dump).mkdir(parents=True, exist_ok=True)
                    (Path(dump) / f"{wf.id}-{run_id}.json").write_text(history.to_json())
            except Exception:  # noqa: BLE001 - the net still reports the failure
                pass
        summary.failures.append(
            Failure(
                test=window.nodeid if window else "(outside any test)",
                workflow_id=wf.id if wf else "?",
                run_id=run_id,
                why=str(err),
                events=events,
            )
        )
    summary.seconds = time.monotonic() - began
    SUMMARIES.append(summary)
    return summary


class HistoriesDoNotReplay(AssertionError):
    """Raised where a test server stops: histories that fail to replay, each with its test."""


def track(start: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Wrap ``start_local_environment``: its environment replays every history at shutdown."""

    @functools.wraps(start)
    async def started(*args: Any, **kwargs: Any) -> Any:
        env = await start(*args, **kwargs)
        if os.environ.get(ENV, "1") == "0":
            return env
        shutdown = env.shutdown

        async def replay_then_shutdown() -> None:
            try:
                summary = await replay_everything(env.client)
            finally:
                await shutdown()
            if summary.failures:
                lines = "\n".join(f"  {f}" for f in summary.failures)
                raise HistoriesDoNotReplay(
                    f"{len(summary.failures)} of {summary.replayed} workflow histories do not replay "
                    f"against the final code:\n{lines}"
                )

        env.shutdown = replay_then_shutdown  # type: ignore[method-assign]
        return env

    return started


def _summary_dir() -> Path:
    """Shared by an xdist controller (this process) and its workers (its children)."""
    controller = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    path = Path(tempfile.gettempdir()) / f"codemode-replay-all-{controller}"
    path.mkdir(exist_ok=True)
    return path


def write_summary() -> None:
    """This test process's servers, for the controller's report (xdist workers' output is not shown)."""
    if not SUMMARIES:
        return
    data = {
        "replayed": sum(s.replayed for s in SUMMARIES),
        "exempt": sum(s.exempt for s in SUMMARIES),
        "unknown": sum(sum(s.unknown_types.values()) for s in SUMMARIES),
        "unreadable": sum(s.unreadable for s in SUMMARIES),
        "failures": sum(len(s.failures) for s in SUMMARIES),
        "seconds": sum(s.seconds for s in SUMMARIES),
        "servers": len(SUMMARIES),
    }
    (_summary_dir() / f"{os.getpid()}.json").write_text(json.dumps(data))


def read_summaries() -> str | None:
    """One line for the end of the run: how many histories the net replayed, and how long it took."""
    files = list(_summary_dir().glob("*.json"))
    if not files:
        return None
    total: dict[str, float] = {}
    for f in files:
        for k, v in json.loads(f.read_text()).items():
            total[k] = total.get(k, 0) + v
        f.unlink()
    return (
        f"replay-all: {int(total['replayed'])} histories from {int(total['servers'])} test servers replayed "
        f"against the final code in {total['seconds']:.1f} s (summed over test processes): "
        f"{int(total['failures'])} failed; {int(total['exempt'])} exempt, "
        f"{int(total.get('unreadable', 0))} with payloads this process cannot read, "
        f"{int(total['unknown'])} of workflow types not importable here"
    )
