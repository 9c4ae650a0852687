"""A prelude (``runtimes/prelude.py``): code run before the code, in its namespace, on every
runtime. Its functions are reached by the code; the code's own lines stay the code's; on Monty,
the host reads from the VM which prelude function made each call (its ``origin``), and a
checkpoint keeps that; a runner's message can never claim an origin."""

from __future__ import annotations

import pytest

from codemode.runtimes import CodeRuntimeError, ToolSignature, normalize_functions
from codemode.runtimes.prelude import Prelude, PreludePart
from codemode.runtimes.transports.protocol import CallMessage

from .test_contract import drive, guarded


def add(a: int, b: int) -> int:
    """Adds."""
    raise NotImplementedError


FUNCTIONS = normalize_functions({"add": add})

HEAD = "class codemode_Snippets:\n"
DOUBLE = "    def double(self, n: int):\n        return add(n, n)\n"
BROKEN = "    def broken(self):\n        return 1 // 0\n"
TAIL = "snippets = codemode_Snippets()\n"
SOURCE = HEAD + DOUBLE + BROKEN + TAIL


def _part(name: str, body: str) -> PreludePart:
    start = len(SOURCE[: SOURCE.index(body)].encode())
    return PreludePart(path=f"snippets.{name}", origin=f"snippet:{name}@v1", start=start, end=start + len(body.encode()))


PRELUDE = Prelude(
    source=SOURCE,
    stubs=[
        ToolSignature(name="snippet:double", path="snippets.double", parameters=[{"name": "n", "annotation": "int"}]),
        ToolSignature(name="snippet:broken", path="snippets.broken"),
    ],
    parts=[_part("double", DOUBLE), _part("broken", BROKEN)],
)


async def test_the_code_calls_what_the_prelude_defines(runtime_factory) -> None:
    calls = []

    def answer(call):
        calls.append(call)
        return call.kwargs.get("a", call.args[0] if call.args else 0) * 2

    code = "x = 1\ny = snippets.double(3)\n[y, add(1, 1)]"
    async with runtime_factory() as rt:
        execution = await guarded(rt.execute(code, functions=FUNCTIONS, prelude=PRELUDE))
        assert execution.prelude == PRELUDE
        result = await drive(execution, answer)
    assert result.output == [6, 2]
    assert [c.function_name for c in calls] == ["add", "add"]
    # The code's own call is on the code's line; the prelude's call has no line of the code.
    assert calls[1].line == 3
    if rt.name == "monty":
        assert [c.origin for c in calls] == ["snippet:double@v1", None]
    else:  # only the host knows where a call was made: a runner never says
        assert [c.origin for c in calls] == [None, None]


async def test_an_error_in_a_prelude_function_names_the_code_line(runtime_factory) -> None:
    code = "a = 1\nb = snippets.broken()\nb"
    async with runtime_factory() as rt:
        execution = await guarded(rt.execute(code, functions=FUNCTIONS, prelude=PRELUDE))
        with pytest.raises(CodeRuntimeError) as err:
            await drive(execution, lambda call: None)
    assert err.value.error_type == "ZeroDivisionError"
    assert err.value.line == 2
    assert "broken" in (err.value.traceback or "")


async def test_monty_checks_the_code_against_the_prelude_stubs() -> None:
    from codemode.runtimes import CodeTypeError
    from codemode.runtimes.monty import MontyRuntime

    rt = MontyRuntime()
    try:
        with pytest.raises(CodeTypeError, match="triple"):
            await rt.execute("snippets.triple(1)", functions=FUNCTIONS, prelude=PRELUDE)
        with pytest.raises(CodeTypeError):
            await rt.execute("snippets.double('x')", functions=FUNCTIONS, prelude=PRELUDE)
    finally:
        await rt.aclose()


async def test_monty_checkpoint_keeps_the_prelude_and_origins() -> None:
    from codemode.runtimes.monty import MontyRuntime
    from codemode.runtimes.monty_run import FEED_FILES

    rt = MontyRuntime()
    try:
        execution = await rt.execute("snippets.double(4) + add(1, 2)", functions=FUNCTIONS, prelude=PRELUDE)
        first = await execution.next()
        assert first.origin == "snippet:double@v1"
        blob = await execution.checkpoint()
        await execution.close()
        restored = await rt.restore(blob)
        assert restored is not None and restored.prelude == PRELUDE
        await restored.provide_result(8, call_id=first.call_id)
        second = await restored.next()
        assert second.origin is None and second.line == 1
        await restored.provide_result(3, call_id=second.call_id)
        result = await restored.next()
        assert result.output == 11
    finally:
        await rt.aclose()
    assert FEED_FILES == ("<python-input-0>", "<python-input-1>")


def test_a_runner_message_cannot_claim_an_origin() -> None:
    msg = CallMessage.model_validate(
        {"type": "call", "call_id": "1", "function_name": "add", "origin": "snippet:double@v1"}
    )
    assert msg.call().origin is None
