"""The runtime contract: what every CodeRuntime must do, through its public interface only.

Parametrized over ``RUNTIME_FACTORIES`` (tests/runtimes/conftest.py). A runtime joins by
adding a factory there; nothing here knows which sandbox runs the code.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

from codemode.runtimes import (
    CodeExecution,
    CodeExecutionError,
    CodeResourceError,
    CodeRuntime,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTimeoutError,
    ExecutionLimits,
    ExecutionProtocolError,
    ExecutionResult,
    FunctionCall,
)
from codemode.runtimes.checkpoint import encode_checkpoint

#: Hang guard only: a test that has not finished by then is stuck, not slow.
HANG_GUARD_S = 30.0

T = TypeVar("T")


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, HANG_GUARD_S)


def get_weather(city: str, units: str = "C") -> dict[str, Any]:
    """Current weather for a city."""
    raise NotImplementedError  # a signature only: the test answers every call


async def fetch(item: int) -> int:
    """An async tool: the code can gather several calls."""
    raise NotImplementedError


async def drive(execution: CodeExecution, answer: Callable[[FunctionCall], Any]) -> ExecutionResult:
    """The consumer's loop from the module docstring of codemode.runtimes.execution."""

    async def loop() -> ExecutionResult:
        event = await execution.next()
        while isinstance(event, FunctionCall):
            await execution.provide_result(answer(event), call_id=event.call_id)
            event = await execution.next()
        return event

    return await guarded(loop())


async def run(
    rt: CodeRuntime,
    code: str,
    *,
    functions: Any = (),
    inputs: dict[str, Any] | None = None,
    limits: ExecutionLimits | None = None,
    answer: Callable[[FunctionCall], Any] = lambda call: None,
) -> ExecutionResult:
    execution = await guarded(rt.execute(code, functions=functions or [], inputs=inputs, limits=limits))
    async with execution:
        return await drive(execution, answer)


# -- results, stdout, inputs --------------------------------------------------------------


async def test_output_is_the_last_expression(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        result = await run(rt, "x = 20\ny = x + 22\ny")
    assert result.output == 42
    assert result.tool_calls == 0


async def test_output_is_none_without_a_final_expression(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        result = await run(rt, "x = 1\nif x:\n    y = 2")
    assert result.output is None


async def test_stdout_is_captured(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        result = await run(rt, "for i in range(3):\n    print('line', i)\n'done'")
    assert result.stdout == "line 0\nline 1\nline 2\n"
    assert result.output == "done"
    assert not result.stdout_truncated


async def test_inputs_are_globals(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        result = await run(
            rt,
            "f'{city} x{n}: ' + ', '.join(tags)",
            inputs={"city": "Paris", "n": 3, "tags": ["a", "b"]},
        )
    assert result.output == "Paris x3: a, b"


# -- tool calls ----------------------------------------------------------------------------


async def test_multi_call_script(runtime_factory: Callable[[], Any]) -> None:
    code = """
temps = {}
for city in ["Paris", "Oslo", "Lima"]:
    temps[city] = get_weather(city)["temp"]
max(temps, key=lambda c: temps[c])
"""
    seen: list[FunctionCall] = []
    table = {"Paris": 18, "Oslo": 4, "Lima": 24}

    def answer(call: FunctionCall) -> dict[str, Any]:
        seen.append(call)
        return {"temp": table[call.args[0]]}

    async with runtime_factory() as rt:
        result = await run(rt, code, functions={"get_weather": get_weather}, answer=answer)
    assert result.output == "Lima"
    assert result.tool_calls == 3
    assert [c.function_name for c in seen] == ["get_weather"] * 3
    assert [c.args for c in seen] == [["Paris"], ["Oslo"], ["Lima"]]
    assert len({c.call_id for c in seen}) == 3


async def test_positional_args_bind_in_declared_order(runtime_factory: Callable[[], Any]) -> None:
    functions = {"get_weather": get_weather}
    calls: list[FunctionCall] = []

    def answer(call: FunctionCall) -> dict[str, Any]:
        calls.append(call)
        return {"temp": 1}

    async with runtime_factory() as rt:
        await run(rt, "get_weather('Paris', 'F')\nget_weather(city='Oslo')\nget_weather('Rome', units='K')",
                  functions=functions, answer=answer)  # fmt: skip
        sig = rt.signatures(functions)["get_weather"]
    bound = [sig.bind(c.args, c.kwargs) for c in calls]
    assert bound == [
        {"city": "Paris", "units": "F"},
        {"city": "Oslo"},
        {"city": "Rome", "units": "K"},
    ]


async def test_tool_error_is_catchable_in_the_code(runtime_factory: Callable[[], Any]) -> None:
    code = """
try:
    w = get_weather("Atlantis")
    msg = "no error"
except ValueError as e:
    msg = "caught: " + str(e)
msg
"""
    async with runtime_factory() as rt:
        async with await guarded(rt.execute(code, functions={"get_weather": get_weather})) as execution:
            call = await guarded(execution.next())
            assert isinstance(call, FunctionCall)
            assert call.args == ["Atlantis"]
            await execution.provide_error("ValueError", "unknown city: Atlantis", call_id=call.call_id)
            result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult)
    assert result.output == "caught: unknown city: Atlantis"


async def test_uncaught_tool_error_is_a_runtime_error(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        async with await guarded(rt.execute("x = 1\nw = get_weather('Atlantis')\nw", functions=["get_weather"])) as ex:
            call = await guarded(ex.next())
            assert isinstance(call, FunctionCall)
            await ex.provide_error("ValueError", "unknown city: Atlantis")
            with pytest.raises(CodeRuntimeError) as info:
                await guarded(ex.next())
    assert info.value.error_type == "ValueError"
    assert "unknown city: Atlantis" in info.value.message
    assert info.value.line == 2


async def test_unknown_function_is_a_name_error_in_the_code(runtime_factory: Callable[[], Any]) -> None:
    # `# type: ignore`: a type-checking runtime would otherwise refuse the code up front.
    code = """
try:
    r = not_a_tool(1)  # type: ignore
except NameError as e:
    r = "caught: " + str(e)
r
"""
    async with runtime_factory() as rt:
        result = await run(rt, code, functions=["get_weather"])
    assert result.output.startswith("caught: ")
    assert "not_a_tool" in result.output
    assert result.tool_calls == 0


async def test_answering_an_unknown_call_is_a_protocol_error(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        async with await guarded(rt.execute("get_weather('Paris')", functions=["get_weather"])) as execution:
            call = await guarded(execution.next())
            assert isinstance(call, FunctionCall)
            assert [c.call_id for c in execution.pending_calls] == [call.call_id]
            with pytest.raises(ExecutionProtocolError):
                await execution.provide_result(1, call_id="no-such-call")
            await execution.provide_result({"temp": 3}, call_id=call.call_id)
            assert execution.pending_calls == []
            result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult)
    assert result.output == {"temp": 3}


# -- concurrency ---------------------------------------------------------------------------

GATHER = """
import asyncio
results = await asyncio.gather(*[fetch(i) for i in range(5)])
sum(results)
"""


async def test_gather_shows_every_call_in_one_batch(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        async with await guarded(rt.execute(GATHER, functions={"fetch": fetch})) as execution:
            batch = await guarded(execution.next_batch())
            assert isinstance(batch, list)
            assert sorted(c.args[0] for c in batch) == [0, 1, 2, 3, 4]
            assert all(c.concurrent and c.function_name == "fetch" for c in batch)
            assert {c.call_id for c in execution.pending_calls} == {c.call_id for c in batch}
            for call in reversed(batch):  # answer order must not matter
                await execution.provide_result(call.args[0] * 10, call_id=call.call_id)
            result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    assert result.output == 100
    assert result.tool_calls == 5


async def test_gather_shows_every_call_through_next(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        async with await guarded(rt.execute(GATHER, functions={"fetch": fetch})) as execution:
            calls = []
            for _ in range(5):  # no answer given yet: every call must still come out
                call = await guarded(execution.next())
                assert isinstance(call, FunctionCall) and call.concurrent
                calls.append(call)
            assert len(execution.pending_calls) == 5
            for call in calls:
                await execution.provide_result(call.args[0] + 1, call_id=call.call_id)
            result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult)
    assert result.output == 15


async def test_gather_answered_as_each_call_arrives(runtime_factory: Callable[[], Any]) -> None:
    """The simplest host loop (answer, then next) must work for gathered calls too."""
    async with runtime_factory() as rt:
        result = await run(rt, GATHER, functions={"fetch": fetch}, answer=lambda call: call.args[0] * 2)
    assert result.output == 20


async def test_gather_answered_by_concurrent_tasks(runtime_factory: Callable[[], Any]) -> None:
    """A host that runs each call as a task may keep calling next() while they run."""
    async with runtime_factory() as rt:
        async with await guarded(rt.execute(GATHER, functions={"fetch": fetch})) as execution:
            tasks: list[asyncio.Task[None]] = []

            async def answer_later(call: FunctionCall) -> None:
                await asyncio.sleep(0.01 * (5 - call.args[0]))
                await execution.provide_result(call.args[0], call_id=call.call_id)

            async def loop() -> ExecutionResult:
                event = await execution.next()
                while isinstance(event, FunctionCall):
                    tasks.append(asyncio.create_task(answer_later(event)))
                    event = await execution.next()
                return event

            result = await guarded(loop())
            await asyncio.gather(*tasks)
    assert len(tasks) == 5
    assert result.output == 10


# -- code errors ---------------------------------------------------------------------------


async def test_syntax_error_has_a_line(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        with pytest.raises(CodeSyntaxError) as info:
            await run(rt, "x = 1\nif x\n    y = 2\ny")
    assert info.value.line == 2
    assert info.value.kind == "syntax"
    assert "line" in info.value.llm_message()


async def test_runtime_error_has_type_and_line(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        with pytest.raises(CodeRuntimeError) as info:
            await run(rt, "data = {'a': 1}\nvalue = data['a']\nmissing = data['b']\nmissing")
    err = info.value
    assert err.error_type == "KeyError"
    assert err.line == 3
    assert "KeyError" in err.llm_message() and "line 3" in err.llm_message()


async def test_runtime_error_surfaces_from_next_with_the_stdout_so_far(runtime_factory: Callable[[], Any]) -> None:
    """``execute`` raises only when the code cannot start; a failure while running comes
    from ``next()``, and what the code printed before it is still readable."""
    async with runtime_factory() as rt:
        async with await guarded(rt.execute("print('before')\nx = 1 / 0", functions=[])) as execution:
            with pytest.raises(CodeRuntimeError) as info:
                await guarded(execution.next())
            assert "before" in execution.stdout
    assert info.value.error_type == "ZeroDivisionError"
    assert info.value.line == 2


async def test_error_after_a_tool_call_has_its_line(runtime_factory: Callable[[], Any]) -> None:
    code = "w = get_weather('Paris')\nt = w['temp']\nt + 'x'"
    async with runtime_factory() as rt:
        with pytest.raises(CodeRuntimeError) as info:
            await run(rt, code, functions={"get_weather": get_weather}, answer=lambda call: {"temp": 3})
    assert info.value.error_type == "TypeError"
    assert info.value.line == 3


# -- limits --------------------------------------------------------------------------------


async def test_infinite_loop_is_stopped_by_the_time_limit(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        with pytest.raises(CodeTimeoutError) as info:
            await run(rt, "n = 0\nwhile True:\n    n += 1", limits=ExecutionLimits(timeout_seconds=1.0))
    assert info.value.kind == "timeout"


async def test_memory_bomb_is_stopped_by_the_memory_limit(runtime_factory: Callable[[], Any]) -> None:
    # 1 GB, four times the default limit; not 10**10, which a 32-bit Python (Pyodide's
    # wasm32) refuses as an OverflowError before it tries to allocate anything.
    async with runtime_factory() as rt:
        with pytest.raises(CodeResourceError) as info:
            await run(rt, 's = "a" * 10**9\nlen(s)')
    assert info.value.error_type == "MemoryError"


async def test_too_many_tool_calls(runtime_factory: Callable[[], Any]) -> None:
    answered: list[int] = []

    def answer(call: FunctionCall) -> int:
        answered.append(call.args[0])
        return 0

    async with runtime_factory() as rt:
        with pytest.raises(CodeResourceError) as info:
            await run(rt, "for i in range(10):\n    get(i)", functions=["get"],
                      limits=ExecutionLimits(max_tool_calls=3), answer=answer)  # fmt: skip
    assert answered == [0, 1, 2]  # the fourth call never reaches the host
    assert "3" in info.value.message


async def test_a_fresh_execution_runs_after_a_failed_one(runtime_factory: Callable[[], Any]) -> None:
    """A limit stops one execution, never the runtime."""
    async with runtime_factory() as rt:
        with pytest.raises(CodeTimeoutError):
            await run(rt, "while True:\n    pass", limits=ExecutionLimits(timeout_seconds=0.5))
        result = await run(rt, "'still here'")
    assert result.output == "still here"


# -- checkpoints ---------------------------------------------------------------------------

SEQUENTIAL = """
total = 0
for i in range(4):
    total += get(i)
print("total", total)
total
"""


async def test_dump_and_restore_in_a_new_runtime(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        execution = await guarded(rt.execute(SEQUENTIAL, functions=["get"]))
        async with execution:
            first = await guarded(execution.next())
            assert isinstance(first, FunctionCall) and first.args == [0]
            await execution.provide_result(100, call_id=first.call_id)
            second = await guarded(execution.next())
            assert isinstance(second, FunctionCall) and second.args == [1]
            blob = execution.dump()
            if blob is None:  # this runtime cannot checkpoint: it must still finish live
                await execution.provide_result(100, call_id=second.call_id)
                result = await drive(execution, lambda call: 100)
                assert result.output == 400
                return
    assert isinstance(blob, bytes)
    async with runtime_factory() as fresh:  # new instance: nothing shared but the bytes
        restored = await guarded(fresh.restore(blob))
        assert restored is not None
        async with restored:
            assert [(c.function_name, c.args) for c in restored.pending_calls] == [("get", [1])]
            await restored.provide_result(20, call_id=second.call_id)
            result = await drive(restored, lambda call: 3)
    assert result.output == 100 + 20 + 3 + 3


async def test_restore_refuses_a_foreign_version(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        foreign = encode_checkpoint(rt.name, "0.0.0-another-version", {"pending": []}, b"\x00" * 64)
        assert await guarded(rt.restore(foreign)) is None
        assert await guarded(rt.restore(b"not a checkpoint at all")) is None


# -- prompt and type checking ----------------------------------------------------------------


async def test_prompt_shows_every_tool(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        prompt = rt.prompt({"get_weather": get_weather, "fetch": fetch})
    assert "def get_weather(city: str, units: str = 'C') -> dict[str, Any]:" in prompt
    assert "async def fetch(item: int) -> int:" in prompt
    assert "Current weather for a city." in prompt


async def test_valid_code_passes_type_check(runtime_factory: Callable[[], Any]) -> None:
    async with runtime_factory() as rt:
        result = await guarded(rt.type_check("w = get_weather('Paris')\nw['temp']", {"get_weather": get_weather}))
    assert result is None


async def test_errors_are_code_execution_errors(runtime_factory: Callable[[], Any]) -> None:
    """One except clause catches every failure of the user's code."""
    async with runtime_factory() as rt:
        for code in ["x = (", "1 / 0", "[][1]"]:
            with pytest.raises(CodeExecutionError) as info:
                await run(rt, code)
            assert info.value.line == 1
            assert info.value.error_type
