"""Four eyes for an agent's code: the child execution an agent workflow's ``run_code`` starts
records who the agent acts for (its memo's ``started_by``, or the tool's ``started_by``), so the
person who set the agent going cannot approve its transfer (issue 37 left child executions
without a starter: a four-eyes rule refused every decision). An agent's start is not signed, so
who it names is not authenticated (issue 45): the call then needs one approver more than the rule
says, so that at least one of them is not whoever set the agent going."""

from __future__ import annotations

import uuid

import pytest
from temporalio.client import Client
from temporalio.worker import Worker

from codemode.activities import ToolRegistry
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal
from tests.integrations.frameworks.common import wait_parked as started_and_parked

from .agent_workflow import AgentWorkflow
from .conftest import TOOLS_MODULE
from .helpers import Person, people_toml, wait_ignored, wait_parked, write_file

TRANSFER = "r = transfer('bob', 12.5)\nr['to']"


@pytest.mark.parametrize("how", ["memo", "argument"])
async def test_the_person_an_agent_acts_for_may_not_approve_its_calls(
    client: Client, task_queue: str, tmp_path, events_file, how: str
) -> None:
    ana, bob, cy = Person("ana"), Person("bob"), Person("cy")
    text = people_toml((ana, ["finance"]), (bob, ["finance"]), (cy, ["finance"]))
    text += '\n[tools.transfer]\napprovers = ["group:finance"]\nfour_eyes = true\n'
    approvers = write_file(tmp_path / "approvers.toml", text)
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    async with (
        CodeModeWorker(client, registry, task_queue=task_queue, approvers=approvers).running(),
        Worker(client, task_queue=f"{task_queue}-agents", workflows=[AgentWorkflow]),
    ):
        args = [TRANSFER, task_queue, None] if how == "memo" else [TRANSFER, task_queue, "cy"]
        memo = {"started_by": "cy"} if how == "memo" else None
        agent = await client.start_workflow(
            AgentWorkflow.run, args=args, id=agent_id, task_queue=f"{task_queue}-agents", memo=memo
        )
        child = client.get_workflow_handle(f"{agent_id}-run_code-call-1")
        assert await started_and_parked(client, child.id) == ["transfer"]
        (call,) = (await wait_parked(child)).pending_approvals
        await child.signal("approve", ApproveSignal(call_id=call.call_id, signature=cy.sign(child.id, call)))
        (ignored,) = (await wait_ignored(child, 1)).ignored_signals
        assert ignored.reason == (
            "four eyes: this run says cy started it, who may not decide its calls (rule tools.transfer)"
        )
        await child.signal("approve", ApproveSignal(call_id=call.call_id, signature=ana.sign(child.id, call)))
        # ana counts, and does not decide alone: the starter is not authenticated
        await child.signal("approve", ApproveSignal(call_id=call.call_id, signature=bob.sign(child.id, call)))
        result = await agent.result()
    assert result["success"] is True and result["output"] == "bob"
