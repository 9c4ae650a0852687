"""The Monty type checker kept warm (``runtimes/monty_checker.py``): one session serves many
checks, and each check sees the stubs and its own code only."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.runtimes.errors import CodeExecutionError, CodeSyntaxError, CodeTypeError
from codemode.runtimes.execution import ExecutionResult
from codemode.runtimes.monty import MontyRuntime
from codemode.runtimes.monty_checker import CHECKERS, TypeChecker, type_check_stubs
from codemode.runtimes.signatures import normalize_functions


async def noop(i: int) -> int:
    return i


STUBS = type_check_stubs(normalize_functions({"noop": noop}))


async def test_one_warm_session_checks_many_codes_and_none_sees_another() -> None:
    rt = MontyRuntime()
    checker = TypeChecker(rt._checker._open_pool, rt._checker._map_error, None, sessions=1)
    opened: list[str] = []
    open_session = checker._open

    async def spy(stubs: str) -> Any:
        opened.append(stubs)
        return await open_session(stubs)

    checker._open = spy  # type: ignore[method-assign]
    try:
        await checker.check("x = 1\nx", STUBS)
        await checker.check("y = await noop(2)\ny", STUBS)
        # x was bound by the first check's code only: this code does not see it
        with pytest.raises(CodeTypeError, match="x"):
            await checker.check("z = x + 1", STUBS)
        with pytest.raises(CodeTypeError):
            await checker.check("noop('a')", STUBS)
        with pytest.raises(CodeSyntaxError):
            await checker.check("def f(:\n    pass", STUBS)
        await checker.check("w = await noop(3)\nw", STUBS)
        assert opened == [STUBS]  # one session served them all
        # other stubs: another session (the code that passed above fails against them)
        with pytest.raises(CodeTypeError):
            await checker.check("w = await noop(3)\nw", type_check_stubs({}))
        assert len(opened) == 2
    finally:
        await checker.aclose()


async def test_a_verdict_that_passed_is_kept() -> None:
    checker = MontyRuntime()._checker
    checks: list[str] = []
    check = checker.check

    async def spy(code: str, stubs: str, bound=()) -> None:  # type: ignore[no-untyped-def]
        checks.append(code)
        await check(code, stubs, bound)

    checker.check = spy  # type: ignore[method-assign]
    try:
        for _ in range(3):
            await checker.check_once("await noop(1)", STUBS)
        assert checks == ["await noop(1)"]
    finally:
        await checker.aclose()


def _count_opens(rt: MontyRuntime) -> list[str]:
    opened: list[str] = []
    open_session = rt._checker._open

    async def spy(stubs: str) -> Any:
        opened.append(stubs)
        return await open_session(stubs)

    rt._checker._open = spy  # type: ignore[method-assign]
    return opened


async def test_cells_that_bind_new_names_keep_one_warm_checker() -> None:
    """The names earlier cells bound are not in the stubs (they would change with every cell
    and start a fresh checker, ~15 ms of CPU, each time): the checker's warm sessions check
    every cell, and a cell still sees the names bound before it and no other."""
    rt = MontyRuntime()
    opened = _count_opens(rt)
    session = await rt.open_session()
    assert session is not None
    try:
        for i in range(6):
            code = f"v{i} = await noop({i})" + (f"\nv{i} += v{i - 1}" if i else "")
            execution = await session.run(code, functions={"noop": noop})
            while not isinstance(event := await execution.next_batch(), ExecutionResult):
                for call in event:
                    await execution.provide_result(call.args[0], call_id=call.call_id)
        with pytest.raises(CodeTypeError, match="v9"):
            await session.run("v9 + v5", functions={"noop": noop})
        assert len(opened) <= CHECKERS and len(set(opened)) == 1  # six cells: six opens before
    finally:
        await session.close()
        await rt.aclose()


async def test_a_diagnostic_names_the_codes_own_lines() -> None:
    rt = MontyRuntime()
    stubs = type_check_stubs(normalize_functions({"noop": noop}))
    code = "x = 1\nif x:\n    y = earlier + 1\n    z = q\n"
    try:
        with pytest.raises(CodeExecutionError) as caught:
            await rt._checker.check(code, stubs, ["earlier", "other"])
    finally:
        await rt.aclose()
    err = caught.value
    assert err.line == 4 and "`q`" in err.message
    assert err.traceback is not None
    assert "earlier =" not in err.traceback and "codemode_bound_value" not in err.traceback
    assert " --> main.py:4:9" in err.traceback
    assert "2 | if x:" in err.traceback and "4 |     z = q" in err.traceback
