"""``run_code`` keeps one session per conversation (outside a workflow): a later call sees
what an earlier one defined, ``restart`` clears it, a run continued from its message history
keeps the session, and ``session=False`` keeps one execution per call. A real pydantic-ai
``Agent`` (``FunctionModel`` reads what a real model is shown), a real dev server and worker."""

from __future__ import annotations

import json

import pytest
from pydantic_ai import Agent

from codemode.client.sessions import close_session, describe_session
from codemode.integrations.pydantic_ai import DurableCodeMode
from tests.workflows.conftest import TOOLS_MODULE

from .agent_model import SEEN, stepwise

DEFINE = "data = [add(1, 2), 4]\ndef total(xs):\n    return sum(xs)\nprint('defined')\ntotal(data)"
USE = "data.append(fetch_rows(2)[1]['id'])\ntotal(data)"


def answers(output: str) -> list:
    return json.loads(output.removeprefix("ANSWER: "))


async def test_calls_share_a_session_and_restart_clears_it(client, task_queue, worker) -> None:
    capability = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)
    calls = [DEFINE, USE, {"code": "fresh = 'new'\nfresh", "restart": True}, "total(data)"]
    agent = Agent(stepwise(*calls), capabilities=[capability])
    SEEN.clear()
    result = await agent.run("define, use, restart")
    # What the model is told: state persists, and what restart does.
    seen = SEEN[0]
    assert "State persists across calls" in seen["tools"]["run_code"]
    assert "`restart=true` starts this call from an empty namespace" in seen["tools"]["run_code"]
    assert "continues the same Python session" in seen["instructions"]
    schema = seen["schemas"]["run_code"]
    assert schema["properties"]["restart"] == {
        "default": False,
        "description": "start from an empty namespace: what earlier calls defined is gone.",
        "type": "boolean",
    }
    assert schema["required"] == ["code"]
    first, second, restarted, after = answers(result.output)
    session = f"run_code-{result.conversation_id}"  # the conversation's session
    assert (first["success"], first["output"], first["stdout"]) == (True, 7, "defined\n")
    assert (first["session"], first["cell"], first["execution_id"]) == (session, 1, f"session:{session}:1")
    assert (second["output"], second["cell"], second["session"]) == (8, 2, session)  # data and total() kept
    assert (restarted["output"], restarted["cell"]) == ("new", 3)
    # After the restart `data` is gone: the code cannot even start (a retry prompt, nothing ran).
    assert isinstance(after, str) and "data" in after and "Fix the code" in after
    status = await describe_session(client, session)
    assert status.restarts == 1 and status.variables == {"fresh": "str"}

    # The conversation continued (its message history): the same session, with what it holds.
    more = Agent(stepwise(*calls, "fresh + '!'"), capabilities=[capability])
    again = await more.run("and more", message_history=result.all_messages())
    assert again.conversation_id == result.conversation_id
    last = answers(again.output)[-1]
    assert (last["output"], last["session"], last["cell"]) == ("new!", session, 5)
    await close_session(client, session)


@pytest.mark.parametrize("session", [True, False])
async def test_two_calls_at_once(client, task_queue, worker, session) -> None:
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from .agent_model import all_tool_returns

    def fn(messages, info):
        returns = all_tool_returns(messages)
        if not returns:
            SEEN.append({"schemas": {t.name: t.parameters_json_schema for t in info.function_tools}})
            return ModelResponse(
                parts=[
                    ToolCallPart("run_code", {"code": "n = add(1, 2)\nn"}, tool_call_id="a"),
                    ToolCallPart("run_code", {"code": "add(3, 4)"}, tool_call_id="b"),
                ]
            )
        return ModelResponse(parts=[TextPart(json.dumps([r.content for r in returns]))])

    capability = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue, session=session)
    SEEN.clear()
    result = await Agent(FunctionModel(fn), capabilities=[capability]).run("two at once")
    returned = json.loads(result.output)
    assert sorted(r["output"] for r in returned) == [3, 7]
    assert len({r["execution_id"] for r in returned}) == 2
    if session:  # two cells of the conversation's session, one after the other
        assert sorted(r["cell"] for r in returned) == [1, 2]
        assert {r["session"] for r in returned} == {f"run_code-{result.conversation_id}"}
        await close_session(client, returned[0]["session"])
    else:  # one execution each, and the tool takes no restart
        assert all(r["execution_id"].startswith("exec-") and "session" not in r for r in returned)
        assert list(SEEN[0]["schemas"]["run_code"]["properties"]) == ["code"]


async def test_a_call_queued_behind_an_approval_is_deferred_with_it(client, task_queue, worker, events_file) -> None:
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import FunctionModel

    from .agent_model import all_tool_returns

    def fn(messages, info):
        returns = all_tool_returns(messages)
        if not returns:
            return ModelResponse(
                parts=[
                    ToolCallPart("run_code", {"code": "paid = transfer('ana', 5)['to']\npaid"}, tool_call_id="a"),
                    ToolCallPart("run_code", {"code": "paid + ' paid'"}, tool_call_id="b"),
                ]
            )
        return ModelResponse(parts=[TextPart(json.dumps({r.tool_call_id: r.content for r in returns}))])

    capability = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)
    agent = Agent(FunctionModel(fn), capabilities=[capability], output_type=[str, DeferredToolRequests])
    first = await agent.run("pay, then say so")
    requests = first.output
    assert isinstance(requests, DeferredToolRequests) and [c.tool_call_id for c in requests.calls] == ["a", "b"]
    parked, held = requests.metadata["a"], requests.metadata["b"]
    assert [p["tool"] for p in parked["pending_approvals"]] == ["transfer"]
    # The second call waits its turn behind the first: deferred too, saying behind what.
    assert (held["cell"], held["pending_approvals"], held["waiting_for"]) == (2, [], parked["execution_id"])
    # The person approves with an edited argument (issue 36): the code sees the edited call's result.
    call_id = parked["pending_approvals"][0]["call_id"]
    record = await capability.decide(parked["execution_id"], call_id, approve=True, by="ana", arguments={"to": "bea"})
    assert record is not None and record.approved_arguments == {"to": "bea", "amount": 5}
    assert (record.asked_arguments, record.door) == ({"to": "ana", "amount": 5}, "pydantic-ai")
    results = await capability.deferred_results(requests)
    resumed = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    returned = json.loads(resumed.output)
    assert (returned["a"]["output"], returned["b"]["output"]) == ("bea", "bea paid")
    assert (returned["b"]["execution_id"], returned["b"]["cell"]) == (held["execution_id"], 2)
    await close_session(client, held["session"])


async def test_a_conversation_whose_session_closed_gets_a_new_one_and_is_told(client, task_queue, worker) -> None:
    capability = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)
    first = await Agent(stepwise("x = 1\nx"), capabilities=[capability]).run("one")
    session = f"run_code-{first.conversation_id}"
    await close_session(client, session)  # (as its idle timeout would)
    # A fresh process would find it closed just the same: this capability knows nothing yet.
    fresh = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)
    more = await Agent(stepwise("x = 1\nx", "y = 2\ny"), capabilities=[fresh]).run(
        "two", message_history=first.all_messages()
    )
    last = answers(more.output)[-1]
    assert (last["session"], last["cell"], last["output"]) == (f"{session}.2", 1, 2)
    assert last["notice"].startswith("Your earlier session had closed (closed on request): this call ran in a fresh")
    await close_session(client, f"{session}.2")
