"""Determinism: recorded histories replay cleanly with temporalio's Replayer.

Two sets: histories recorded now (every code path of the workflow), and histories committed
under histories/ by earlier versions, so a change that breaks running workflows fails here.
Regenerate the committed ones deliberately with CODEMODE_RECORD_HISTORIES=1, or add a set
beside them with CODEMODE_RECORD_HISTORIES=<prefix> (``fused-*.json``: tool activities that
run the step after their call, issue 11; ``deferred-*.json``: steps that keep the run live
on their worker instead of saving a checkpoint, issue 11). ``window64-wide_gather.json`` and
``window40-wide_gather.json``: a batch of 50 gathered calls before and after the call window
went from 64 to 40 (``workflows/call_window.py``, ``CALL_WINDOW_PATCH``).
``artifacts-save_artifact.json``: a ``save_artifact`` call answered by the step (issue 27).
``decisions-edited.json``, ``decisions-answered.json``: a call approved with edited arguments,
and one answered by a person instead of the tool (issue 36). ``notify-*.json``: approvals that
started a notification child per event (issue 36, as first merged); ``notifyla-*.json``: the
same, the notify workflows now started by a local activity (``workflows/approval_notices.py``).
``python-*.json``: the python runtime (a live process kept on its worker, each resume step on
that worker's own queue), recorded before its tool activities ran the step after their call
(issue 28); ``pyfused-*.json``: recorded after. Regenerate or add a python set with
CODEMODE_RECORD_PYTHON_HISTORIES=<prefix>. ``gate-*.json``: the approval scenarios after each
call that waits asks the worker's approvers file first (the ``approval_gate`` activity, issue 37;
no file here); ``approvers-*.json``: signed decisions, N-of-M and policy rules under a file
(recorded by tests/approvers/test_signed_decisions.py with CODEMODE_RECORD_APPROVER_HISTORIES=1).
``gatenotify-*.json``: the approval scenarios once both were merged: the gate, then the park,
then the review with its notifications (local activities), edited and answered decisions.
``gen43-*.json``, ``gen43py-*.json``: every scenario once runs read one generation marker first
(issue 43, ``workflows/versions.py``); ``gen43-held-*``: decisions held until their call waits,
``gen43-notices-*``: notices started by an activity, only on a worker with a channel (recorded by
tests/workflows/test_replay_stress.py with CODEMODE_RECORD_HISTORIES=gen43).
``park0-*.json``: e2b and modal runs parked on an approval before ``sandbox_park`` existed (one
``sandbox_release`` that asked for a pause); ``park-*.json``: after it (``PARK_PATCH``): a
docker and an e2b sandbox paused, a blaxel one in standby, a modal sandbox released after its grace period and the run
replayed (recorded by ``test_parking.py`` with CODEMODE_RECORD_PARK_HISTORIES=1).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from temporalio.client import WorkflowFailureError, WorkflowHistory
from temporalio.worker import Replayer

from codemode.client.executions import start_execution
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import (
    Answer,
    ApproveSignal,
    CodeExecutionRequest,
    Decision,
    DenySignal,
    ExecutionStatus,
)

HISTORIES = Path(__file__).parent / "histories"

SCENARIOS = {
    "sequential": CodeExecutionRequest(code="a = slow_step(1, 0.01)\nb = lookup('Paris')\n[a, b]"),
    "gather": CodeExecutionRequest(code="import asyncio\nawait asyncio.gather(*[fetch(i) for i in range(5)])"),
    # More calls than the workflow keeps in flight at once (CALL_WINDOW): several windows.
    "wide_gather": CodeExecutionRequest(code="import asyncio\nsum(await asyncio.gather(*[fetch(i) for i in range(50)]))"),
    "retry": CodeExecutionRequest(code="flaky('x')"),
    "tool_error": CodeExecutionRequest(code="try:\n    lookup('Atlantis')\nexcept ValueError as e:\n    r = str(e)\nr"),
    "code_error": CodeExecutionRequest(code="x = 1\nx / 0"),
    "invalid_args": CodeExecutionRequest(code="try:\n    slow_step(i=bad)\nexcept ValueError:\n    pass\n1", inputs={"bad": "x"}),
    "approved": CodeExecutionRequest(code="transfer('bob', 1)['to']"),
    "denied": CodeExecutionRequest(code="try:\n    transfer('eve', 1)\nexcept PermissionError as e:\n    r = str(e)\nr"),
    "code_review": CodeExecutionRequest(code="lookup('Rome')", require_code_approval=True),
    "decided": CodeExecutionRequest(code="transfer('ann', 2)['to']"),
    "ignored_signal": CodeExecutionRequest(code="transfer('joe', 3)['to']"),
    "cancelled": CodeExecutionRequest(code="transfer('max', 4)['to']"),
    # A person's edit of the arguments, and an answer instead of the tool (issue 36).
    "edited": CodeExecutionRequest(code="transfer('kim', 5)['amount']"),
    "answered": CodeExecutionRequest(code="transfer('lou', 6)['ref']"),
    # A built-in host function the step answers (issue 27): a reference journaled, no activity.
    "save_artifact": CodeExecutionRequest(code="save_artifact('a.txt', 'x')\nslow_step(1, 0.01)"),
}


async def _aiter(items):
    for item in items:
        yield item


async def _drive_approvals(handle, decide) -> None:
    # Each waiting call is decided once: a query answered before the worker took the decision
    # still lists the call (with the no-cache worker of test_determinism.py, for a while).
    decided: set[str] = set()
    while True:
        desc = await handle.describe()
        if desc.status is not None and desc.status.name != "RUNNING":
            return
        status = await handle.query("status", result_type=ExecutionStatus)
        for pending in status.pending_approvals:
            if pending.call_id not in decided:
                decided.add(pending.call_id)
                await decide(handle, pending.call_id)
        await asyncio.sleep(0.05)


async def _ignored_then_approved(handle, cid) -> None:
    await handle.signal("approve", {"call_id": "nope", "by": "alice"})
    await handle.signal("approve", {"call_id": int(cid), "by": "alice"})


#: The scenarios recorded on the python runtime too (its steps take other paths).
PYTHON_SCENARIOS = ("sequential", "gather", "retry", "tool_error", "code_error", "approved", "denied", "cancelled")


async def _record(client, task_queue, runtime: str = "monty", names=SCENARIOS) -> dict[str, WorkflowHistory]:
    histories = {}
    for name in names:
        request = SCENARIOS[name].model_copy(update={"runtime": runtime})
        handle = await start_execution(client, request, task_queue=task_queue)
        if name == "denied":
            decide = lambda h, cid: h.signal("deny", DenySignal(call_id=cid, by="bob", reason="no"))  # noqa: E731
        elif name == "decided":
            decide = lambda h, cid: h.execute_update("decide", Decision(call_id=cid, approve=True, by="ann"))  # noqa: E731
        elif name == "edited":
            decide = lambda h, cid: h.execute_update(  # noqa: E731
                "decide", Decision(call_id=cid, approve=True, by="ann", arguments={"amount": 4}, door="cli")
            )
        elif name == "answered":
            decide = lambda h, cid: h.execute_update(  # noqa: E731
                "decide", Decision(call_id=cid, approve=True, by="ann", answer=Answer(value={"ref": "r"}), door="cli")
            )
        elif name == "ignored_signal":
            decide = _ignored_then_approved
        elif name == "cancelled":
            decide = lambda h, cid: h.cancel()  # noqa: E731
        else:
            decide = lambda h, cid: h.signal("approve", ApproveSignal(call_id=cid, by="alice"))  # noqa: E731
        await asyncio.wait_for(_drive_approvals(handle, decide), timeout=60)
        with contextlib.suppress(WorkflowFailureError):  # the cancelled one
            await handle.result()
        histories[name] = await handle.fetch_history()
    return histories


async def test_recorded_histories_replay(client, task_queue, worker, events_file) -> None:
    histories = await _record(client, task_queue)
    if record := os.environ.get("CODEMODE_RECORD_HISTORIES"):
        # =1 rewrites the committed set; any other value is a prefix for a new set beside
        # it (the earlier sets stay: running workflows of those versions must still replay).
        prefix = "" if record == "1" else f"{record}-"
        HISTORIES.mkdir(exist_ok=True)
        for name, history in histories.items():
            (HISTORIES / f"{prefix}{name}.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    results = await replayer.replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    failures = {wid: str(err) for wid, err in results.replay_failures.items()}
    assert not failures


async def test_recorded_python_histories_replay(client, task_queue, worker, events_file) -> None:
    histories = await _record(client, task_queue, "python", PYTHON_SCENARIOS)
    if prefix := os.environ.get("CODEMODE_RECORD_PYTHON_HISTORIES"):
        for name, history in histories.items():
            (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    results = await replayer.replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}


async def test_committed_histories_replay(converter) -> None:
    files = sorted(HISTORIES.glob("*.json"))
    assert len(files) >= len(SCENARIOS)
    histories = [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=converter)
    results = await replayer.replay_workflows(_aiter(histories), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}
