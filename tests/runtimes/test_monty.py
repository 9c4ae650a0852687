"""Monty-specific behaviour: VM snapshots, type checking against the tool stubs, the prompt,
stdout limits, and the edges of its pool. Real Monty throughout."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from codemode.runtimes import (
    FULL_PYTHON,
    CheckpointTier,
    CodeExecution,
    CodeResourceError,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTypeError,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    SandboxError,
    build_code_mode_prompt,
    normalize_functions,
)
from codemode.runtimes.checkpoint import decode_checkpoint, encode_checkpoint, read_header
from codemode.runtimes.monty import MONTY_VERSION, MontyRuntime

ROOT = Path(__file__).resolve().parents[2]
GUARD_S = 30.0


def get_weather(city: str) -> dict[str, Any]:
    """Current weather for a city."""
    raise NotImplementedError


async def fetch(item: int) -> int:
    raise NotImplementedError


@pytest.fixture(scope="module")
async def monty() -> AsyncIterator[MontyRuntime]:
    rt = MontyRuntime()
    try:
        yield rt
    finally:
        await rt.aclose()


async def finish(execution: CodeExecution, answer: Any = lambda call: None) -> ExecutionResult:
    async def loop() -> ExecutionResult:
        event = await execution.next()
        while isinstance(event, FunctionCall):
            await execution.provide_result(answer(event), call_id=event.call_id)
            event = await execution.next()
        return event

    return await asyncio.wait_for(loop(), GUARD_S)


# -- checkpoints -----------------------------------------------------------------------------

SCRIPT = """
report = []
for city in cities:
    w = get_weather(city)
    print("got", city)
    report.append(city + "=" + str(w["temp"]))
", ".join(report)
"""


async def test_paused_run_restored_in_a_new_runtime_with_a_new_pool(monty: MontyRuntime) -> None:
    cities = ["Paris", "Oslo", "Lima", "Rome"]
    execution = await monty.execute(SCRIPT, functions={"get_weather": get_weather}, inputs={"cities": cities})
    async with execution:
        for temp in (18, 4):  # answer two calls, stop at the third
            call = await execution.next()
            assert isinstance(call, FunctionCall)
            await execution.provide_result({"temp": temp}, call_id=call.call_id)
        third = await execution.next()
        assert isinstance(third, FunctionCall) and third.args == ["Lima"]
        blob = execution.dump()
        assert execution.stdout == "got Paris\ngot Oslo\n"
    assert blob is not None
    header = read_header(blob)
    assert header is not None and header["runtime"] == "monty" and header["version"] == MONTY_VERSION
    assert len(blob) < 64 * 1024  # a small heap gives a small snapshot

    async with MontyRuntime() as other:  # its own pool: nothing shared but the bytes
        restored = await other.restore(blob)
        assert restored is not None
        async with restored:
            assert [(c.call_id, c.function_name, c.args) for c in restored.pending_calls] == [
                (third.call_id, "get_weather", ["Lima"])
            ]
            await restored.provide_result({"temp": 24}, call_id=third.call_id)
            result = await finish(restored, lambda call: {"temp": 15})
    assert result.output == "Paris=18, Oslo=4, Lima=24, Rome=15"
    assert result.stdout == "got Lima\ngot Rome\n"  # a restored handle prints what follows the checkpoint
    assert result.tool_calls == 4


async def test_an_answer_given_before_the_dump_travels_with_it(monty: MontyRuntime) -> None:
    execution = await monty.execute("a = get(1)\nb = get(2)\na * b", functions=["get"])
    async with execution:
        call = await execution.next()
        assert isinstance(call, FunctionCall)
        await execution.provide_result(6, call_id=call.call_id)
        blob = execution.dump()  # answered, not yet delivered to the VM
    assert blob is not None
    restored = await monty.restore(blob)
    assert restored is not None
    async with restored:
        assert restored.pending_calls == []
        result = await finish(restored, lambda c: 7)
    assert result.output == 42


async def test_the_async_checkpoint_is_the_dump(monty: MontyRuntime) -> None:
    """``checkpoint()`` (the session's own dump, awaited: the event loop is not blocked on the
    Monty subprocess) writes the same bytes as ``dump()``, paused at a call, answered but not
    delivered, and mid-gather; it restores like the dump does."""
    execution = await monty.execute(
        "import asyncio\nxs = await asyncio.gather(*[fetch(i) for i in range(3)])\nb = get(sum(xs))\nb",
        functions={"fetch": fetch, "get": None},
    )
    async with execution:
        calls = await execution.next_batch()
        assert isinstance(calls, list) and len(calls) == 3
        assert await execution.checkpoint() == execution.dump()
        await execution.provide_result(10, call_id=calls[0].call_id)
        assert await execution.checkpoint() == execution.dump()
        for c in calls[1:]:
            await execution.provide_result(10, call_id=c.call_id)
        call = await execution.next()
        assert isinstance(call, FunctionCall) and call.args == [30]
        blob = await execution.checkpoint()
        assert blob == execution.dump()
    assert await execution.checkpoint() is None  # closed: nothing to checkpoint
    restored = await monty.restore(blob)
    assert restored is not None
    async with restored:
        assert [c.args for c in restored.pending_calls] == [[30]]
        await restored.provide_result(31, call_id=call.call_id)
        result = await finish(restored)
    assert result.output == 31


GATHER = """
import asyncio
values = await asyncio.gather(*[fetch(i) for i in range(5)])
values
"""


async def test_gather_dumped_mid_batch_is_restored(monty: MontyRuntime) -> None:
    execution = await monty.execute(GATHER, functions={"fetch": fetch})
    async with execution:
        batch = await execution.next_batch()
        assert isinstance(batch, list) and len(batch) == 5
        for call in batch[:2]:  # two answers arrive before the worker goes away
            await execution.provide_result(call.args[0] * 100, call_id=call.call_id)
        blob = execution.dump()
    assert blob is not None
    async with MontyRuntime() as other:
        restored = await other.restore(blob)
        assert restored is not None
        async with restored:
            waiting = restored.pending_calls
            assert [c.call_id for c in waiting] == [c.call_id for c in batch[2:]]
            assert all(c.concurrent for c in waiting)
            for call in waiting:
                await restored.provide_result(call.args[0] * 100, call_id=call.call_id)
            result = await restored.next_batch()
    assert isinstance(result, ExecutionResult)
    assert result.output == [0, 100, 200, 300, 400]


async def test_gather_dumped_while_calls_come_one_by_one_is_restored(monty: MontyRuntime) -> None:
    execution = await monty.execute(GATHER, functions={"fetch": fetch})
    async with execution:
        calls = [await execution.next() for _ in range(5)]
        assert all(isinstance(c, FunctionCall) for c in calls)
        blob = execution.dump()
    assert blob is not None
    restored = await monty.restore(blob)
    assert restored is not None
    async with restored:
        assert len(restored.pending_calls) == 5
        for call in restored.pending_calls:
            await restored.provide_result(call.args[0] + 1, call_id=call.call_id)
        result = await finish(restored)
    assert result.output == [1, 2, 3, 4, 5]


async def test_a_checkpoint_from_another_version_is_refused(monty: MontyRuntime) -> None:
    execution = await monty.execute("get(1)", functions=["get"])
    async with execution:
        await execution.next()
        blob = execution.dump()
    assert blob is not None
    decoded = decode_checkpoint(blob, "monty", MONTY_VERSION)
    assert decoded is not None
    meta, payload = decoded
    assert await monty.restore(encode_checkpoint("monty", "1.3.9", meta, payload)) is None
    assert await monty.restore(encode_checkpoint("python", MONTY_VERSION, meta, payload)) is None
    # Right header, damaged VM bytes: Monty refuses them and so do we.
    assert await monty.restore(encode_checkpoint("monty", MONTY_VERSION, meta, payload[: len(payload) // 2])) is None
    assert await monty.restore(blob[:10]) is None
    # The untouched checkpoint still restores after all that.
    restored = await monty.restore(blob)
    assert restored is not None
    async with restored:
        assert len(restored.pending_calls) == 1
        await restored.provide_result("ok")
        assert (await finish(restored)).output == "ok"


# -- type checking ---------------------------------------------------------------------------


async def test_a_type_error_against_the_stubs_has_its_line(monty: MontyRuntime) -> None:
    code = "city = 'Paris'\nw = get_weather(city)\nt = get_weather(42)\nt"
    with pytest.raises(CodeTypeError) as info:
        await monty.execute(code, functions={"get_weather": get_weather})
    err = info.value
    assert err.line == 3
    assert err.error_type == "TypeError"
    assert "get_weather" in err.message
    text = err.llm_message()
    assert "Expected `str`, found `Literal[42]`" in text  # ty's own explanation
    assert text.count("Argument to function `get_weather` is incorrect") == 1
    assert "PermissionError" not in text  # the checker's prelude stays out of the quoted stub lines


async def test_inputs_are_known_to_the_type_checker(monty: MontyRuntime) -> None:
    execution = await monty.execute("get_weather(city)", functions={"get_weather": get_weather}, inputs={"city": "Oslo"})
    async with execution:
        call = await execution.next()
    assert isinstance(call, FunctionCall) and call.args == ["Oslo"]


async def test_type_check_raises_without_running_the_code(monty: MontyRuntime, capfd: pytest.CaptureFixture[str]) -> None:
    sigs = {"get_weather": get_weather}
    bad = "print('SIDE EFFECT')\nw = get_weather('Paris')\nn: int = w\nn"
    with pytest.raises(CodeTypeError) as info:
        await monty.type_check(bad, sigs)
    assert info.value.line == 3
    # Valid code is checked, not run: the loop never finishes and nothing is printed anywhere.
    good = "print('SIDE EFFECT')\nw = get_weather('Paris')\nwhile True:\n    pass"
    assert await asyncio.wait_for(monty.type_check(good, sigs), GUARD_S) is None
    assert "SIDE EFFECT" not in capfd.readouterr().out
    with pytest.raises(CodeSyntaxError):
        await monty.type_check("x = (", sigs)
    with pytest.raises(CodeSyntaxError, match="class inheritance"):
        await monty.type_check("class A:\n    pass\nclass B(A):\n    pass", sigs)


def _get_weather_by_id(city: int) -> dict[str, Any]:
    raise NotImplementedError


async def test_a_passed_type_check_is_not_repeated_for_the_same_code_and_stubs() -> None:
    """ty costs ~16 ms per execution: a verdict is kept per (code, stubs), so a replay or a
    re-run skips it, while different stubs (other tools, other inputs) check again and code
    that failed keeps failing."""
    rt = MontyRuntime()
    checked: list[str] = []
    check = rt._checker.check

    async def spy(code: str, stubs: str, bound=()) -> None:  # type: ignore[no-untyped-def]
        checked.append(code)
        await check(code, stubs, bound)

    rt._checker.check = spy  # type: ignore[method-assign]
    sigs = {"get_weather": get_weather}
    try:
        for _ in range(2):
            execution = await rt.execute("get_weather('Oslo')", functions=sigs)
            async with execution:
                assert isinstance(await execution.next(), FunctionCall)
        # the same code against another signature of the tool is checked, and refused
        with pytest.raises(CodeTypeError):
            await rt.execute("get_weather('Oslo')", functions={"get_weather": _get_weather_by_id})
        for _ in range(2):
            with pytest.raises(CodeTypeError) as info:
                await rt.execute("get_weather(42)", functions=sigs)
            assert info.value.line == 1
    finally:
        await rt.aclose()
    # checked once for the two runs; again against other stubs; failed code every time
    assert checked == ["get_weather('Oslo')", "get_weather('Oslo')", "get_weather(42)", "get_weather(42)"]


async def test_the_memory_limit_is_the_codes_alone() -> None:
    """ty needs over 1 MB even for `1`; it runs in its own session, so a small heap limit
    still type-checks and runs small code, and limits what the code allocates."""
    rt = MontyRuntime()
    small = ExecutionLimits(max_memory_bytes=512 * 1024)
    try:
        execution = await rt.execute("1", functions={"get_weather": get_weather}, limits=small)
        assert (await finish(execution)).output == 1
        with pytest.raises(CodeTypeError):
            await rt.execute("get_weather(42)", functions={"get_weather": get_weather}, limits=small)
        execution = await rt.execute("x = list(range(200000))\nlen(x)", functions={}, limits=small)
        with pytest.raises(CodeResourceError, match="memory limit"):
            await finish(execution)
    finally:
        await rt.aclose()


async def test_type_checking_can_be_turned_off() -> None:
    async with MontyRuntime(type_check=False) as rt:
        execution = await rt.execute("get_weather(42)", functions={"get_weather": get_weather})
        async with execution:
            call = await execution.next()
    assert isinstance(call, FunctionCall) and call.args == [42]


# -- prompt and capabilities ---------------------------------------------------------------


def test_prompt_differs_from_full_python() -> None:
    functions = {"get_weather": get_weather}
    monty_prompt = MontyRuntime().prompt(functions)
    full = build_code_mode_prompt(normalize_functions(functions), FULL_PYTHON)
    assert monty_prompt != full
    assert "No del statement" in monty_prompt and "No del statement" not in full
    assert "Classes cannot inherit" in monty_prompt
    assert "Only these modules can be imported: asyncio," in monty_prompt
    assert "full Python (CPython)" in full and "full Python (CPython)" not in monty_prompt
    stub = "def get_weather(city: str) -> dict[str, Any]:"
    assert stub in monty_prompt and stub in full


def test_capabilities() -> None:
    caps = MontyRuntime.capabilities
    assert caps.checkpoint_tier == CheckpointTier.SNAPSHOT
    assert caps.type_checking and not caps.filesystem and not caps.network and not caps.third_party_packages


# -- stdout, values, errors --------------------------------------------------------------------


async def test_stdout_over_the_limit_is_truncated_with_a_note(monty: MontyRuntime) -> None:
    code = "for i in range(100):\n    print('line', i)\n'done'"
    execution = await monty.execute(code, functions=[], limits=ExecutionLimits(max_stdout_bytes=50))
    async with execution:
        result = await finish(execution)
    assert result.output == "done"  # the code ran to its end
    assert result.stdout_truncated
    kept, note = result.stdout.split("\n[output truncated", 1)
    assert len(kept.encode()) <= 50 and kept.startswith("line 0\nline 1\n")
    assert "50 bytes" in note


async def test_unknown_exception_types_keep_their_name(monty: MontyRuntime) -> None:
    code = "try:\n    get()\nexcept Exception as e:\n    r = type(e).__name__ + ': ' + str(e)\nr"
    execution = await monty.execute(code, functions=["get"])
    async with execution:
        await execution.next()
        await execution.provide_error("QuotaExceeded", "slow down")
        result = await finish(execution)
    assert result.output == "RuntimeError: QuotaExceeded: slow down"


async def test_a_tool_result_monty_cannot_hold_is_a_type_error_in_the_code(monty: MontyRuntime) -> None:
    code = "try:\n    v = get()\nexcept TypeError as e:\n    v = 'refused: ' + str(e)\nv"
    execution = await monty.execute(code, functions=["get"])
    async with execution:
        await execution.next()
        await execution.provide_result(object())
        result = await finish(execution)
    assert result.output.startswith("refused: the tool result cannot be passed to the code")


async def test_values_cross_with_their_python_types(monty: MontyRuntime) -> None:
    execution = await monty.execute("v = get()\n(v, type(v[1]).__name__)", functions=["get"])
    async with execution:
        await execution.next()
        await execution.provide_result((1, {2, 3}, b"x", None, 1.5))
        result = await finish(execution)
    assert result.output == ((1, {2, 3}, b"x", None, 1.5), "set")


async def test_an_input_monty_cannot_hold_is_refused_up_front(monty: MontyRuntime) -> None:
    with pytest.raises(TypeError, match="inputs cannot be passed"):
        await monty.execute("x", functions=[], inputs={"x": object()})
    # The refused execution gave its worker back.
    execution = await monty.execute("1 + 1", functions=[])
    async with execution:
        assert (await finish(execution)).output == 2


async def test_os_access_is_denied_inside_the_code() -> None:
    code = "import os\ntry:\n    os.listdir('/')\n    r = 'listed'\nexcept PermissionError as e:\n    r = 'denied'\nr"
    async with MontyRuntime() as rt:
        execution = await rt.execute(code, functions=[])
        async with execution:
            assert (await finish(execution)).output == "denied"


async def test_a_failed_execution_cannot_be_driven_further(monty: MontyRuntime) -> None:
    execution = await monty.execute("x = 1\nraise ValueError('bad')", functions=[])
    async with execution:
        with pytest.raises(CodeRuntimeError):
            await execution.next()
        with pytest.raises(RuntimeError):  # ExecutionProtocolError
            await execution.next()
        assert execution.dump() is None


# -- the pool --------------------------------------------------------------------------------


async def test_executions_left_open_exhaust_the_pool_with_a_clear_error() -> None:
    async with MontyRuntime(max_processes=1, checkout_timeout=0.5) as rt:
        held = await rt.execute("get()", functions=["get"])
        try:
            await held.next()
            with pytest.raises(SandboxError, match="not closed"):
                await rt.execute("1", functions=[])
        finally:
            await held.close()
        execution = await rt.execute("'free again'", functions=[])  # closing gave the worker back
        async with execution:
            assert (await finish(execution)).output == "free again"


EXIT_SCRIPT = textwrap.dedent(
    """
    import asyncio
    from codemode.runtimes.monty import MontyRuntime

    async def main():
        async with MontyRuntime() as rt:
            ex = await rt.execute("a = get(1)\\nb = get(2)\\na + b", functions=["get"])
            async with ex:
                event = await ex.next()
                while not hasattr(event, "output"):
                    await ex.provide_result(event.args[0])
                    event = await ex.next()
            print(event.output)

    asyncio.run(main())
    """
)


def test_processes_using_monty_exit_cleanly() -> None:
    """A smoke check, not proof: interpreter exit right after the last Monty await aborted
    (SIGABRT) about one sequential run in six before codemode.runtimes.monty installed its exit hook
    (see runtimes/exit_settle.py); with four processes at once this catches a
    regression only some of the time."""
    procs = [
        subprocess.Popen([sys.executable, "-c", EXIT_SCRIPT], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    outcomes = [(p.wait(timeout=GUARD_S), *p.communicate()) for p in procs]
    for code, out, err in outcomes:
        assert (code, out.strip()) == (0, b"3"), err.decode()[-2000:]


def test_the_pool_size_is_a_setting(monkeypatch) -> None:
    """``CODEMODE_MONTY_PROCESSES`` sizes the pool (and so how many runs a worker keeps live);
    a value that is not a whole number of at least 3 is refused, naming the variable."""
    monkeypatch.setenv("CODEMODE_MONTY_PROCESSES", "256")
    assert MontyRuntime().live_capacity == 256
    assert MontyRuntime(max_processes=8).live_capacity == 8  # the argument wins
    monkeypatch.setenv("CODEMODE_MONTY_PROCESSES", "lots")
    with pytest.raises(ValueError, match="CODEMODE_MONTY_PROCESSES='lots'"):
        MontyRuntime()
    monkeypatch.delenv("CODEMODE_MONTY_PROCESSES")
    assert MontyRuntime().live_capacity >= 64
