"""A pydantic-ai agent whose one tool runs its code durably (the model is scripted, offline)."""

import asyncio

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from codemode.pydantic_ai import DurableCodeMode

CODE = "temps = [get_weather(c)['temp_c'] for c in ['Paris', 'Tokyo']]\nmax(temps)"


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    returned = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returned:
        return ModelResponse(parts=[TextPart(f"warmest: {returned[-1].content['output']}C")])
    assert "get_weather" in (info.instructions or ""), "the tool stubs reach the model"
    return ModelResponse(parts=[ToolCallPart("run_code", {"code": CODE})])


async def main() -> None:
    agent = Agent(FunctionModel(model), capabilities=[DurableCodeMode("tools", task_queue="samples")])
    result = await agent.run("Which city is warmest?")
    print(result.output)


if __name__ == "__main__":
    asyncio.run(main())
