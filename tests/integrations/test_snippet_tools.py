"""Saved snippets offered to agents as tools of their own (issue 48): one per snippet, its
schema and docstring, each call one durable execution of the snippet's call with the version
pinned. A real dev server and worker; pydantic-ai's agent loop (its ``FunctionModel`` plays the
model), the OpenAI Agents SDK's ``FunctionTool`` and a LangChain tool invoked as their
frameworks invoke them, and ADK's declaration."""

from __future__ import annotations

import json

from agents.tool_context import ToolContext
from pydantic_ai import Agent

from codemode.client.executions import run_execution
from codemode.client.snippets import promote, remove
from codemode.integrations.pydantic_ai import DurableCodeMode
from codemode.integrations.snippet_tools import snippet_tools
from codemode.workflows.models import CodeExecutionRequest
from tests.workflows.conftest import TOOLS_MODULE

from .agent_model import SEEN, stepwise


async def test_each_snippet_is_a_tool_of_its_own(client, task_queue, worker) -> None:
    source = await run_execution(
        client,
        CodeExecutionRequest(code="# Adds two numbers on the host.\nadd(x, y)", inputs={"x": 2, "y": 3}),
        task_queue=task_queue,
    )
    saved, _ = await promote(client, source.execution_id, "adder", by="ana")
    try:
        (tool,) = await snippet_tools(client)
        assert (tool.name, tool.snippet, tool.version) == ("snippet_adder", "adder", saved.version)
        assert tool.description.startswith("Adds two numbers on the host.")
        assert tool.parameters["properties"] == {"x": {"type": "integer"}, "y": {"type": "integer"}}

        # pydantic-ai: the capability offers it beside run_code; the model calls it with arguments.
        cap = DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue, session=False, snippets=[tool])
        SEEN.clear()
        result = await Agent(stepwise({"x": 10, "y": 5}, tool="snippet_adder"), capabilities=[cap]).run("add")
        assert set(SEEN[0]["tools"]) == {"run_code", "snippet_adder"}
        assert SEEN[0]["schemas"]["snippet_adder"]["properties"] == tool.parameters["properties"]
        (answer,) = json.loads(result.output.removeprefix("ANSWER: "))
        assert answer["success"] and answer["output"] == 15
        assert [c["tool"] for c in answer["tool_calls"]] == ["snippet:adder", "add"]

        # The OpenAI Agents SDK: a FunctionTool with the snippet's schema.
        from codemode.openai_agents import snippet_tool as openai_snippet_tool

        function_tool = openai_snippet_tool(tool, client=client, task_queue=task_queue, id_prefix=task_queue)
        assert function_tool.params_json_schema == tool.parameters
        ctx = ToolContext(
            context=None, tool_name=tool.name, tool_call_id="call-openai", tool_arguments='{"x": 1, "y": 2}'
        )
        shown = json.loads(await function_tool.on_invoke_tool(ctx, '{"x": 1, "y": 2}'))
        assert shown["output"] == 3 and shown["execution_id"].startswith(task_queue)
        again = json.loads(await function_tool.on_invoke_tool(ctx, '{"x": 1, "y": 2}'))
        assert again["execution_id"] == shown["execution_id"]  # the same call: the same execution

        # LangChain / LangGraph: a tool with the snippet's parameters, the call id injected.
        from codemode.langgraph import snippet_tool as langgraph_snippet_tool

        lc_tool = langgraph_snippet_tool(tool, client=client, task_queue=task_queue, id_prefix=task_queue)
        message = await lc_tool.ainvoke(
            {"name": tool.name, "args": {"x": 4, "y": 4}, "id": "call-lc", "type": "tool_call"},
            config={"configurable": {"thread_id": "t1"}},
        )
        assert json.loads(message.content)["output"] == 8

        # Google ADK: a function tool declared with the snippet's parameters.
        from codemode.adk import snippet_tool as adk_snippet_tool

        declared = adk_snippet_tool(tool)._get_declaration()
        assert declared.name == "snippet_adder" and set(declared.parameters_json_schema["properties"]) == {"x", "y"}

        # run_code given the snippets: its prompt shows their stubs, and its code calls the very
        # versions shown, even once a newer one is saved.
        from codemode.openai_agents import run_code_tool

        run_code = run_code_tool(
            TOOLS_MODULE, snippets=[tool], client=client, task_queue=task_queue, id_prefix=f"{task_queue}-rc"
        )
        assert (
            "def adder(self, x: int, y: int) -> Any:" in run_code.description
            and "Adds two numbers on the host." in run_code.description
        )
        newer = await run_execution(
            client, CodeExecutionRequest(code="add(x, y) + 100", inputs={"x": 2, "y": 3}), task_queue=task_queue
        )
        assert (await promote(client, newer.execution_id, "adder", by="ana"))[0].version != saved.version
        arguments = json.dumps({"code": "snippets.adder(x=20, y=1)"})
        ctx = ToolContext(context=None, tool_name="run_code", tool_call_id="call-rc", tool_arguments=arguments)
        ran = json.loads(await run_code.on_invoke_tool(ctx, arguments))
        assert ran["success"] and ran["output"] == 21
    finally:
        await remove(client, "adder")
