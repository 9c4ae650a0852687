"""The net under the suite (``tests/replay_all.py``) tells a history that does not replay from
one whose payloads this process cannot read. The hard case: the SDK drops a signal it cannot
convert with only a log line, so the replay diverges where that signal decided something (a
canceled timer it has no command for). That run is unreadable here, not a nondeterminism."""

from __future__ import annotations

import json
import logging

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from tests.replay_all import DroppedSignals, events_in_brief
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


async def test_a_dropped_unreadable_signal_is_told_apart_from_nondeterminism() -> None:
    history = _with_unreadable_approval("gen47-approved.json")
    dropped = DroppedSignals()
    sdk_log = logging.getLogger("temporalio.worker._workflow_instance")
    sdk_log.addHandler(dropped)
    try:
        replayer = Replayer(
            workflows=[CodeExecutionWorkflow],
            workflow_runner=CodeModeWorkflowRunner(),
            data_converter=pydantic_data_converter,
        )
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    finally:
        sdk_log.removeHandler(dropped)
    assert result.replay_failure is not None and "Nondeterminism" in str(result.replay_failure)
    assert dropped.runs == {history.events[0].workflow_execution_started_event_attributes.original_execution_run_id}
    assert "Signaled(approve)" in events_in_brief(history) and "TimerCanceled" in events_in_brief(history)


async def test_the_same_history_read_whole_replays() -> None:
    history = WorkflowHistory.from_json("exec-readable", json.loads((HISTORIES / "gen47-approved.json").read_text()))
    replayer = Replayer(
        workflows=[CodeExecutionWorkflow],
        workflow_runner=CodeModeWorkflowRunner(),
        data_converter=pydantic_data_converter,
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None
