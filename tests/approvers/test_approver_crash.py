"""SIGKILL the worker right after a signed decision arrives: the next worker's replay applies
the decision once (the same check over the same recorded keys), and the tool runs once."""

from __future__ import annotations

import signal

from temporalio.worker import Replayer

from codemode.client.executions import start_execution
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.workflows.test_crash import spawn_worker

from .conftest import read_events
from .helpers import Person, people_toml, status_of, wait_parked, write_file


async def test_sigkill_between_signed_decision_and_call(
    client, temporal_address, task_queue, events_file, tmp_path, monkeypatch
) -> None:
    ana = Person("ana")
    path = write_file(tmp_path / "approvers.toml", people_toml((ana, [])) + '\n[tools.transfer]\napprovers = ["ana"]\n')
    monkeypatch.setenv("CODEMODE_APPROVERS", str(path))  # the worker processes inherit it
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        code = "a = transfer('bob', 1)['to']\nb = transfer('cy', 2)['to']\n[a, b]"
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
        (call,) = (await wait_parked(handle)).pending_approvals
        # an unsigned one first (ignored), then ana's
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, by="ana"))
        await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=ana.sign(handle.id, call)))
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        (call2,) = (await wait_parked(handle)).pending_approvals
        assert call2.args == ["cy", 2]
        status = await status_of(handle)
        assert [i.reason.split(":")[0] for i in status.ignored_signals] == ["unsigned"]
        await handle.signal("approve", ApproveSignal(call_id=call2.call_id, signature=ana.sign(handle.id, call2)))
        outcome = await handle.result()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success and outcome.output == ["bob", "cy"]
    starts = [e["arg"] for e in read_events(events_file) if e["event"] == "start"]
    assert starts == ["bob", "cy"]  # each call's tool ran once
    assert [c.approval.signatures[0].signer for c in outcome.tool_calls] == ["ana", "ana"]
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    await replayer.replay_workflow(history)
