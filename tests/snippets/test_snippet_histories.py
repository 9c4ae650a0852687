"""Histories of runs that call saved snippets (generation-48) replay: a call on Monty, one that
parks and is approved, one that runs under a signed grant, one refused before running, one on
the python runtime. With CODEMODE_RECORD_HISTORIES=<prefix> they are kept beside the committed
ones (``tests/workflows/histories/<prefix>-snippet-*.json``), which tests/workflows/test_replay.py
replays from then on."""

from __future__ import annotations

import os

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from codemode.activities import ToolRegistry
from codemode.client.executions import start_execution
from codemode.client.signing import Signer
from codemode.client.snippets import grant, promote
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.approvers.helpers import Person, people_toml, wait_parked, write_file
from tests.workflows.test_replay import HISTORIES, _aiter

from . import snippet_tools
from .conftest import TOOLS_MODULE

REPORT = "rows = sales(week)\nsum(r['amount'] for r in rows)"
SEND = "rows = sales(week)\nsend_report(to, sum(r['amount'] for r in rows))"
ANA = Person("ana")


async def _approve(handle) -> None:
    (call,) = (await wait_parked(handle)).pending_approvals
    await handle.signal("approve", ApproveSignal(call_id=call.call_id, signature=ANA.sign(handle.id, call)))


async def test_runs_that_call_snippets_replay(client, task_queue, tmp_path, events_file) -> None:
    path = write_file(tmp_path / "approvers.toml", people_toml((ANA, [])))
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    signer = Signer("ana", ANA.key)
    histories: dict[str, WorkflowHistory] = {}
    async with CodeModeWorker(client, registry, task_queue=task_queue, approvers=path).running():
        source = await start_execution(client, CodeExecutionRequest(code=REPORT, inputs={"week": 1}), task_queue=task_queue)
        await source.result()
        await promote(client, source.id, "report", signer=signer)
        sender = await start_execution(
            client, CodeExecutionRequest(code=SEND, inputs={"week": 1, "to": "a@example.com"}), task_queue=task_queue
        )
        await _approve(sender)
        await sender.result()
        await promote(client, sender.id, "send", signer=signer)

        async def record(name: str, code: str, approve: bool = False, **request) -> None:
            handle = await start_execution(client, CodeExecutionRequest(code=code, **request), task_queue=task_queue)
            if approve:
                await _approve(handle)
            outcome = await handle.result()
            assert outcome.success == (name != "snippet-refused"), outcome.error
            histories[name] = await handle.fetch_history()

        await record("snippet-call", "[snippets.report(week=2), sales(3)[0]['amount']]")
        await record("snippet-parked", "snippets.send(week=2, to='b@example.com')", approve=True)
        await grant(client, "send", signer)
        await record("snippet-granted", "snippets.send(week=3, to='c@example.com')")
        await record("snippet-python", "x = snippets.report(week=4)\nx", runtime="python")
    narrow = ToolRegistry([snippet_tools.send_report])
    async with CodeModeWorker(client, narrow, task_queue=f"{task_queue}-narrow", approvers=path).running():
        handle = await start_execution(
            client, CodeExecutionRequest(code="snippets.report(week=5)"), task_queue=f"{task_queue}-narrow"
        )
        assert "calls the tool sales" in (await handle.result()).error.message
        histories["snippet-refused"] = await handle.fetch_history()

    if prefix := os.environ.get("CODEMODE_RECORD_HISTORIES"):
        for name, history in histories.items():
            (HISTORIES / f"{prefix}-{name}.json").write_text(history.to_json())
    replayer = Replayer(workflows=[CodeExecutionWorkflow], data_converter=client.data_converter)
    results = await replayer.replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    assert not {wid: str(err) for wid, err in results.replay_failures.items()}
