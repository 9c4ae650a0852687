"""The net under the suite (``tests/replay_all.py``) tells a history that does not replay from
one whose payloads this process cannot read. A decision signal it cannot read fails the replay
with "Failed decoding" (``workflows/signal_input.py``), counted as unreadable; any other signal
the SDK cannot convert it drops with only a log line, so the replay diverges where that signal
decided something: ``DroppedSignals`` finds such runs in the SDK's log."""

from __future__ import annotations

import json
import logging

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from tests.replay_all import UNREADABLE, DroppedSignals, events_in_brief
from tests.workflows.test_replay import HISTORIES


def _with_unreadable_approval(name: str) -> WorkflowHistory:
    """A committed approval history whose approve signal reads as another codec's bytes."""
    data = json.loads((HISTORIES / name).read_text())
    for event in data["events"]:
        signal = event.get("workflowExecutionSignaledEventAttributes")
        if signal and signal["signalName"] == "approve":
            for payload in signal["input"]["payloads"]:
                payload["metadata"] = {"encoding": "YmluYXJ5L2VuY3J5cHRlZA=="}  # binary/encrypted
    return WorkflowHistory.from_json("exec-unreadable", data)


async def test_an_unreadable_decision_fails_as_unreadable_not_as_nondeterminism() -> None:
    history = _with_unreadable_approval("gen47-approved.json")
    replayer = Replayer(
        workflows=[CodeExecutionWorkflow],
        workflow_runner=CodeModeWorkflowRunner(),
        data_converter=pydantic_data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    failure = str(result.replay_failure)
    assert "Failed decoding the approve signal's input, encoding binary/encrypted" in failure, failure
    assert "Nondeterminism" not in failure and any(marker in failure for marker in UNREADABLE)
    assert "Signaled(approve)" in events_in_brief(history) and "TimerCanceled" in events_in_brief(history)


def test_a_signal_the_sdk_dropped_is_found_in_its_log() -> None:
    dropped = DroppedSignals()
    sdk_log = logging.getLogger("temporalio.worker._workflow_instance")
    sdk_log.addHandler(dropped)
    try:
        sdk_log.error(  # the SDK's own words (temporalio/worker/_workflow_instance.py)
            "Failed deserializing signal input for codemode_enqueue on workflow CodeModeSession with ID "
            "session-x and run ID 0190-run, dropping the signal"
        )
    finally:
        sdk_log.removeHandler(dropped)
    assert dropped.runs == {"0190-run"}


async def test_the_same_history_read_whole_replays() -> None:
    history = WorkflowHistory.from_json("exec-readable", json.loads((HISTORIES / "gen47-approved.json").read_text()))
    replayer = Replayer(
        workflows=[CodeExecutionWorkflow],
        workflow_runner=CodeModeWorkflowRunner(),
        data_converter=pydantic_data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
