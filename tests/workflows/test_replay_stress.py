"""No approval run stalls on replay (issue 43), with the orders that broke runs made certain.

Each test makes one timing-dependent order happen every time (``tests/workflows/replay_stress.py``)
and checks that the run ends as it should, that no workflow task failed, and that its history
replays. On main before issue 43 (85705d4) the first two failed every time: a query answered while
the first step's local activity finished gave "Non-deprecated patch marker encountered for change
approvers-gate" on replay, and an approval signalled while the call's gate ran was set aside as
"not waiting" (the call then waited its whole deadline). ``bench/approval_replay.py`` runs the
same harness hundreds of times over every approval path.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError

from codemode.client.executions import start_execution
from codemode.workflows.models import ApprovalRecord, ApproveSignal, CodeExecutionRequest, Decision, ExecutionStatus

from .replay_stress import (
    SCENARIOS,
    Plan,
    SlowActivities,
    Timing,
    Totals,
    check_tools_once,
    replay_failures,
    slow_queries,
    stress_worker,
)
from .replay_stress import (
    run_plan as run_stress_plan,
)

pytestmark = pytest.mark.slow

TRANSFER = "transfer('bob', 1)['to']"
HISTORIES = Path(__file__).parent / "histories"


def _keep(history, name: str) -> None:
    """With CODEMODE_RECORD_HISTORIES=PREFIX, keep ``history`` beside the committed ones
    (``PREFIX-NAME.json``), which tests/workflows/test_replay.py replays from then on."""
    if prefix := os.environ.get("CODEMODE_RECORD_HISTORIES"):
        (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())


def _failed_tasks(history) -> list[str]:
    from temporalio.api.enums.v1 import EventType

    return [
        e.workflow_task_failed_event_attributes.failure.message
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def _approve_when_waiting(handle, timeout: float = 30) -> None:
    for _ in range(int(timeout / 0.05)):
        status = await handle.query("status", result_type=ExecutionStatus)
        for pending in status.pending_approvals:
            await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="alice"))
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the call never waited")


@pytest.mark.parametrize("runtime", ["monty", "python"])
async def test_a_query_answered_while_the_first_step_ends_replays(client, runtime, events_file) -> None:
    """A status query waiting at the server when the worker takes the run's first task, answered
    slowly: the start step (a local activity on Monty) finishes meanwhile, Core completes the task
    with its marker and gives the result to the workflow in the next task. The code after the
    step then reads no patch (``workflows/versions.py``), so the replay is the same."""
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    request = CodeExecutionRequest(code=f"{TRANSFER}\n# {uuid.uuid4().hex}", runtime=runtime)
    handle = await start_execution(client, request, task_queue=task_queue)
    early = asyncio.create_task(handle.query("status", result_type=ExecutionStatus))
    await asyncio.sleep(0.5)  # the query waits with the first task: no worker polls yet
    with slow_queries(0.5):
        async with stress_worker(client, task_queue, cached=True, slow=SlowActivities()):
            await early
            await _approve_when_waiting(handle)
            outcome = await handle.result()
    assert outcome.success and outcome.output == "bob"
    history = await handle.fetch_history()
    assert _failed_tasks(history) == []
    assert await replay_failures(client, [history]) == {}


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
async def test_a_decision_sent_while_its_gate_runs_counts(client, cached, events_file) -> None:
    """Three gathered calls; each one's approval is sent while its gate activity runs (the call
    under review, not waiting yet). Before, those decisions were set aside as "not waiting" and
    the calls then waited for days. Now each is held and applies when its call begins to wait."""
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    slow = SlowActivities({"approval_gate": 1.5})
    async with stress_worker(client, task_queue, cached=cached, slow=slow):
        request = SCENARIOS["gathered"].request(1)
        handle = await start_execution(client, request, task_queue=task_queue)
        for _ in range(200):  # the step has asked: the calls are under review
            if [e for e in await _events(handle) if e == "ACTIVITY_TASK_SCHEDULED"]:
                break
            await asyncio.sleep(0.02)
        for call_id in ("1", "2", "3"):
            await handle.signal("approve", ApproveSignal(call_id=call_id, by="alice"))
        status = await handle.query("status", result_type=ExecutionStatus)
        assert status.state == "running" and not status.ignored_signals
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success and outcome.output == ["a", "b", "c"]
    assert [r.approval.by for r in outcome.tool_calls if r.approval] == ["alice"] * 3
    history = await handle.fetch_history()
    assert _failed_tasks(history) == []
    assert await replay_failures(client, [history]) == {}
    _keep(history, f"held-gathered-{'cached' if cached else 'uncached'}")


async def _events(handle) -> list[str]:
    from temporalio.api.enums.v1 import EventType

    return [EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") async for e in handle.fetch_history_events()]


async def test_an_update_for_a_call_under_review_answers_when_it_waits(client, events_file) -> None:
    """``decide`` for a call whose gate runs is accepted, waits, and returns the decision once the
    call waits; one for a call the step never asks for is refused when the step is taken in."""
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    slow = SlowActivities({"approval_gate": 1.0, "sandbox_start": 0.5})
    async with stress_worker(client, task_queue, cached=True, slow=slow):
        handle = await start_execution(client, SCENARIOS["one"].request(2), task_queue=task_queue)
        # While the start step runs: a decision for a call nobody has seen is held, then refused.
        never = asyncio.create_task(handle.execute_update("decide", Decision(call_id="7", approve=True, by="ann")))
        await asyncio.sleep(0.3)
        early = asyncio.create_task(
            handle.execute_update("decide", Decision(call_id="1", approve=True, by="ann"), result_type=ApprovalRecord)
        )
        record = await asyncio.wait_for(early, 30)
        assert record.decision == "approved" and record.by == "ann"
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await asyncio.wait_for(never, 30)
        assert "call 7 is not waiting" in str(refused.value.cause)
        outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome.success and outcome.output == "bob"
    history = await handle.fetch_history()
    assert _failed_tasks(history) == []
    assert await replay_failures(client, [history]) == {}
    _keep(history, "held-update")


async def test_notices_start_as_activities_only_where_a_channel_is(client, events_file) -> None:
    """A run of this generation starts each notice's notify workflow with an activity, and only
    when the worker's gate said the worker has a channel: none at all without a notify config."""
    from codemode.approvals.notify.config import NotifyConfig
    from codemode.worker.dev_server import free_port
    from tests.approvals.receivers import Receiver

    receiver = Receiver(secret="s", port=free_port())
    await receiver.up()
    try:
        for notify, name in (
            (NotifyConfig.model_validate({"webhooks": [{"url": receiver.url, "secret": "s"}]}), "on"),
            (None, "off"),
        ):
            task_queue = f"tq-{uuid.uuid4().hex[:8]}"
            async with stress_worker(client, task_queue, cached=True, slow=SlowActivities(), notify=notify):
                handle = await start_execution(client, SCENARIOS["one"].request(3), task_queue=task_queue)
                await _approve_when_waiting(handle)
                assert (await asyncio.wait_for(handle.result(), 30)).output == "bob"
                # The notices are delivered by notify workflows on this worker: wait for them
                # before it stops (the run may end before its "decided" notice is sent).
                for _ in range(300 if notify is not None else 0):
                    if len(receiver.events()) >= 2:
                        break
                    await asyncio.sleep(0.1)
            history = await handle.fetch_history()
            starts = [
                e
                for e in history.events
                if e.activity_task_scheduled_event_attributes.activity_type.name == "codemode.notify.start"
            ]
            assert len(starts) == (2 if name == "on" else 0), name  # requested, decided
            assert _failed_tasks(history) == [] and await replay_failures(client, [history]) == {}
            _keep(history, f"notices-{name}")
        assert receiver.events() == ["approval.requested", "approval.decided"]
    finally:
        await receiver.down()


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
async def test_every_approval_path_under_pressure(client, cached, events_file) -> None:
    """A small batch of the bench's runs (every scenario, blind early decisions, status queries
    without pause, slow gates and steps), four at a time: nothing nondeterministic, no decision
    lost, no run stuck, each tool run as often as it should."""
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    slow = SlowActivities()
    totals = Totals()
    reports = []
    async with stress_worker(client, task_queue, cached=cached, slow=slow):
        for timing, delays in (
            (Timing(early_after=0.05), {"approval_gate": 0.3}),
            (Timing(hammer=True), {"sandbox_start": 0.2, "sandbox_resume": 0.2}),
        ):
            plan = Plan(scenarios=list(SCENARIOS), delays=delays, timing=timing, runs=len(SCENARIOS), concurrency=4)
            reports += await run_stress_plan(client, task_queue, plan, slow, totals)
    check_tools_once(reports, events_file, totals)
    totals.replay = len(await replay_failures(client, [r.history for r in reports]))
    assert totals.clean, (totals.line(), totals.examples)


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
async def test_signed_decisions_held_under_a_file_agree_everywhere(client, cached, tmp_path, events_file) -> None:
    """Issue 45: under an approvers file, a signed decision sent while the call's gate runs is held,
    judged again against the file when the call waits (a recheck), and applied; an unsigned one
    sent then is held and refused. The workflow, the audit and ``--verify`` say the same of each."""
    from codemode.activities.models import StepResult
    from codemode.client.histories.audit import fetch_audit, fetch_runs
    from codemode.client.histories.verify import verify_runs
    from codemode.workflows.models import PendingApproval, ApproveSignal as Approve
    from tests.approvers.helpers import Person, people_toml

    ana = Person("ana")
    path = tmp_path / "approvers.toml"
    path.write_text(people_toml((ana, [])) + '\n[tools.wire]\napprovers = ["ana"]\n')
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    slow = SlowActivities({"approval_gate": 1.5})
    async with stress_worker(client, task_queue, cached=cached, slow=slow, approvers=path):
        handle = await start_execution(client, SCENARIOS["gathered"].request(4), task_queue=task_queue)
        steps: list[StepResult] = []
        for _ in range(300):  # the step has asked: its calls are under review (their gates run)
            history = await handle.fetch_history()
            steps = [
                StepResult.model_validate_json(e.marker_recorded_event_attributes.details["result"].payloads[0].data)
                for e in history.events
                if e.WhichOneof("attributes") == "marker_recorded_event_attributes"
                and "result" in e.marker_recorded_event_attributes.details
            ]
            if steps and steps[0].calls:
                break
            await asyncio.sleep(0.05)
        first_run = history.events[0].workflow_execution_started_event_attributes.first_execution_run_id
        for call in steps[0].calls:
            seen = PendingApproval(
                call_id=call.call_id, tool=call.tool, args=call.args, kwargs=call.kwargs, run_id=first_run
            )
            await handle.signal("approve", Approve(call_id=call.call_id, by="ana"))  # unsigned: held, then refused
            await handle.signal("approve", Approve(call_id=call.call_id, signature=ana.sign(handle.id, seen)))
        outcome = await asyncio.wait_for(handle.result(), 60)
        status = await handle.query("status", result_type=ExecutionStatus)
    assert outcome.success and outcome.output == ["a", "b", "c"]
    assert [r.approval.by for r in outcome.tool_calls if r.approval] == ["ana"] * 3
    workflow_ignored = sorted(i.reason.split(":")[0] for i in status.ignored_signals)
    assert workflow_ignored == ["unsigned"] * 3
    audit = await fetch_audit(client, handle.id)
    assert sorted(i.reason.split(":")[0] for i in audit.ignored_signals) == workflow_ignored
    assert [c.approval.by for c in audit.calls] == ["ana (signed)"] * 3
    runs, _ = await fetch_runs(client, handle.id)
    checked = await verify_runs(handle.id, runs, client.data_converter)
    assert checked.ok and [d.signers for d in checked.decisions] == [["ana"]] * 3, checked
    history = await handle.fetch_history()
    assert _failed_tasks(history) == [] and await replay_failures(client, [history]) == {}
    _keep(history, f"held-signed-{'cached' if cached else 'uncached'}")
