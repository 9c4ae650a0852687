"""The pydantic-ai capability hands a run's images to the model as ``BinaryContent`` and names
every artifact in the return; a session cell keeps its artifacts."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from codemode.integrations.pydantic_ai import DurableCodeMode
from tests.workflows.conftest import TOOLS_MODULE

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
CODE = f"save_artifact('plot.png', {PNG!r})\nsave_artifact('data.csv', 'a,b\\n1,2\\n')\n'saved'"


def model(seen: list[Any]) -> FunctionModel:
    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        parts = [p for m in messages for p in getattr(m, "parts", [])]
        if not any(isinstance(p, ToolCallPart) for p in parts):
            return ModelResponse(parts=[ToolCallPart("run_code", {"code": CODE}, tool_call_id="call-1")])
        seen.extend(parts)
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(fn)


async def test_images_reach_the_model_as_binary_content(client, task_queue, worker) -> None:
    seen: list[Any] = []
    agent = Agent(model(seen), capabilities=[DurableCodeMode(TOOLS_MODULE, client=client, task_queue=task_queue)])
    await agent.run("draw")
    [ret] = [p for p in seen if isinstance(p, ToolReturnPart)]
    assert ret.content["success"] is True and ret.content["cell"] == 1  # a cell of the conversation's session
    assert ret.content["artifacts"] == [
        {"name": "plot.png", "mime_type": "image/png", "size": len(PNG)},
        {"name": "data.csv", "mime_type": "text/csv", "size": 8},
    ]
    shown = [
        c
        for p in seen
        if isinstance(p, UserPromptPart)
        for c in (p.content if isinstance(p.content, list) else [p.content])
    ]
    images = [c for c in shown if isinstance(c, BinaryContent)]
    assert [(i.media_type, i.data) for i in images] == [("image/png", PNG)]  # the CSV is named, not shown
    assert "Artifact plot.png:" in shown
