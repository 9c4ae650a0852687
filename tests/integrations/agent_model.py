"""The scripted model the agent tests use: a pydantic-ai ``FunctionModel`` function that reads
exactly what a real model is shown (the instructions, the tool definitions, the messages) and
answers as a model would: with a ``run_code`` call, then with text built from the tool's return.

``script`` lists the codes to send, one per model turn; a retry prompt moves to the next one.
Everything the model saw is appended to ``SEEN`` for the test to inspect."""

from __future__ import annotations

import json
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

SEEN: list[dict[str, Any]] = []


def last_tool_return(messages: list[ModelMessage]) -> ToolReturnPart | None:
    for message in reversed(messages):
        for part in getattr(message, "parts", []):
            if isinstance(part, ToolReturnPart):
                return part
    return None


def scripted(*codes: str, tool: str = "run_code") -> FunctionModel:
    """A model that sends ``codes`` in turn (each after the previous tool return or retry
    prompt), then answers ``ANSWER: <the last return as JSON>``."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent = sum(1 for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolCallPart))
        last = last_tool_return(messages)
        SEEN.append(
            {
                "instructions": info.instructions or "",
                "tools": {t.name: t.description for t in info.function_tools},
                "last_return": None
                if last is None
                else {"content": last.content, "outcome": getattr(last, "outcome", None)},
            }
        )
        retried = last is not None and getattr(last, "outcome", None) == "retried"
        if sent < len(codes) and (last is None or retried):
            return ModelResponse(parts=[ToolCallPart(tool, {"code": codes[sent]}, tool_call_id=f"call-{sent + 1}")])
        return ModelResponse(parts=[TextPart("ANSWER: " + json.dumps(last.content if last else None, default=str))])

    return FunctionModel(fn)


def all_tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def stepwise(*calls: str | dict[str, Any], tool: str = "run_code") -> FunctionModel:
    """A model that makes ``calls`` one per turn, each after the previous call's return
    (a code, or the tool's arguments), then answers ``ANSWER: <every return, as JSON>``."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent = sum(1 for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolCallPart))
        returns = all_tool_returns(messages)
        SEEN.append(
            {
                "instructions": info.instructions or "",
                "tools": {t.name: t.description for t in info.function_tools},
                "schemas": {t.name: t.parameters_json_schema for t in info.function_tools},
            }
        )
        if sent < len(calls):
            args = calls[sent] if isinstance(calls[sent], dict) else {"code": calls[sent]}
            return ModelResponse(parts=[ToolCallPart(tool, args, tool_call_id=f"call-{sent + 1}")])
        return ModelResponse(parts=[TextPart("ANSWER: " + json.dumps([r.content for r in returns], default=str))])

    return FunctionModel(fn)
