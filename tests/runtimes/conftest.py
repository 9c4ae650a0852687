"""Runtime contract fixtures: every runtime in RUNTIME_FACTORIES must pass tests/runtimes/test_contract.py.

A factory is an async context manager factory yielding a fresh CodeRuntime. New runtimes
(python with each transport, e2b with its fake cloud boundary) add an entry here.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from runtimes import CodeRuntime


@contextlib.asynccontextmanager
async def _monty() -> AsyncIterator[CodeRuntime]:
    from runtimes.monty import MontyRuntime

    rt = MontyRuntime()
    try:
        yield rt
    finally:
        await rt.aclose()


@contextlib.asynccontextmanager
async def _python(transport: str) -> AsyncIterator[CodeRuntime]:
    from runtimes.python import PythonRuntime

    rt = PythonRuntime(transport=transport, isolation="bwrap")
    try:
        yield rt
    finally:
        await rt.aclose()


#: name -> zero-argument callable returning an async context manager of a CodeRuntime.
RUNTIME_FACTORIES: dict[str, Callable[[], Any]] = {
    "monty": _monty,
    "python-stdio": lambda: _python("stdio"),
    "python-http": lambda: _python("http"),
}


@pytest.fixture(params=sorted(RUNTIME_FACTORIES))
def runtime_factory(request: pytest.FixtureRequest) -> Callable[[], Any]:
    """Parametrizes a test over every runtime; use ``async with runtime_factory() as rt``."""
    return RUNTIME_FACTORIES[request.param]
