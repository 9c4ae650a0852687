"""The MCP front's results have every field (issue 44): code that ends in an uncaught
``KeyError`` reports the error's ``kind`` (its default, ``runtime``) and its other defaulted
fields, and each call's, in the structured content a client reads."""

from __future__ import annotations

from typing import Any


async def test_an_uncaught_error_reports_its_kind(modern: Any) -> None:
    res = await modern.call_tool("execute", {"code": 'get_weather("Paris")\n{"a": 1}["b"]\n'})
    report = res.structured_content
    assert res.is_error and report["status"] == "failed", res
    error = report["error"]
    assert error["type"] == "KeyError" and error["kind"] == "runtime", error
    assert "line" in error and "traceback" in error, error
    [call] = report["tool_calls"]
    assert call["error"] is None and call["approval"] is None and call["attempts"] == 1, call
