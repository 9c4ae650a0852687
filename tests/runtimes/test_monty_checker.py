"""The Monty type checker kept warm (``runtimes/monty_checker.py``): one session serves many
checks, and each check sees the stubs and its own code only."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.runtimes.errors import CodeSyntaxError, CodeTypeError
from codemode.runtimes.monty import MontyRuntime
from codemode.runtimes.monty_checker import TypeChecker, type_check_stubs
from codemode.runtimes.signatures import normalize_functions


async def noop(i: int) -> int:
    return i


STUBS = type_check_stubs(normalize_functions({"noop": noop}), None)


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
            await checker.check("w = await noop(3)\nw", type_check_stubs({}, None))
        assert len(opened) == 2
    finally:
        await checker.aclose()


async def test_a_verdict_that_passed_is_kept() -> None:
    checker = MontyRuntime()._checker
    checks: list[str] = []
    check = checker.check

    async def spy(code: str, stubs: str) -> None:
        checks.append(code)
        await check(code, stubs)

    checker.check = spy  # type: ignore[method-assign]
    try:
        for _ in range(3):
            await checker.check_once("await noop(1)", STUBS)
        assert checks == ["await noop(1)"]
    finally:
        await checker.aclose()
