"""``DurableCodeMode`` on a real pydantic-ai ``Agent`` (its ``FunctionModel`` plays the model
and reads what a real model is shown), a real dev server and a real worker."""

from __future__ import annotations

import json

from pydantic_ai import Agent

from codemode.integrations.pydantic_ai import DurableCodeMode
from tests.workflows.conftest import TOOLS_MODULE

from .agent_model import SEEN, scripted


async def test_the_model_sees_the_stubs_and_the_result_of_its_code(client, task_queue, worker, events_file) -> None:
    code = "a = add(2, 3)\nprint('a is', a)\nrows = fetch_rows(3)\n{'a': a, 'rows': len(rows)}"
    agent = Agent(scripted(code), capabilities=[DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)])
    SEEN.clear()
    result = await agent.run("add two numbers and count rows")
    first = SEEN[0]
    assert "def add(a: int, b: int) -> int:" in first["instructions"]  # the stubs, as the sandbox checks them
    assert "This is Monty" in first["instructions"]  # the runtime's own rules
    assert list(first["tools"]) == ["run_code"]
    answer = json.loads(result.output.removeprefix("ANSWER: "))
    assert answer["success"] is True
    assert answer["output"] == {"a": 5, "rows": 3}
    assert answer["stdout"] == "a is 5\n"
    assert [c["tool"] for c in answer["tool_calls"]] == ["add", "fetch_rows"]
    # (a cell of the conversation's session: test_pydantic_ai_session.py)
    assert answer["execution_id"] == f"session:run_code-{result.conversation_id}:1" and answer["cell"] == 1


async def test_a_syntax_error_is_a_retry_prompt_naming_the_line(client, task_queue, worker) -> None:
    broken = "x = 1\ny = add(x, 2))\ny"
    fixed = "x = 1\ny = add(x, 2)\ny"
    agent = Agent(
        scripted(broken, fixed), capabilities=[DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)]
    )
    SEEN.clear()
    result = await agent.run("compute")
    retry = SEEN[1]["last_return"]
    assert retry["outcome"] == "retried"
    assert str(retry["content"]).startswith("SyntaxError (line 2): ")
    answer = json.loads(result.output.removeprefix("ANSWER: "))
    assert answer["success"] and answer["output"] == 3


async def test_a_type_error_against_the_stubs_is_a_retry_prompt(client, task_queue, worker, events_file) -> None:
    agent = Agent(
        scripted("add('one', 2)", "add(1, 2)"),
        capabilities=[DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)],
    )
    SEEN.clear()
    result = await agent.run("compute")
    retry = SEEN[1]["last_return"]
    assert retry["outcome"] == "retried"
    assert str(retry["content"]).startswith("TypeError (line 1): ")
    assert 'Expected `int`, found `Literal["one"]`' in str(retry["content"])  # the checker's own words
    assert json.loads(result.output.removeprefix("ANSWER: "))["output"] == 3


async def test_a_runtime_error_is_the_tools_return(client, task_queue, worker) -> None:
    code = "x = add(1, 1)\nraise ValueError('bad value ' + str(x))"
    agent = Agent(scripted(code), capabilities=[DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)])
    result = await agent.run("fail")
    answer = json.loads(result.output.removeprefix("ANSWER: "))
    assert answer["success"] is False
    assert answer["error"] == {"type": "ValueError", "message": "bad value 2", "line": 2}
    assert [c["status"] for c in answer["tool_calls"]] == ["ok"]
