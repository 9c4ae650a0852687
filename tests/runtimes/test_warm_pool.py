"""Warm interpreters for the python runtime (issue 40, ``runtimes/warm_pool.py``): an
execution's first start takes one already started, with the hash seed the interpreter was
started with, which a replay on a cold interpreter reuses; nothing else ever takes one."""

from __future__ import annotations

import asyncio

import pytest

from codemode.runtimes import ExecutionResult
from codemode.runtimes.python import PythonRuntime
from codemode.runtimes.types import Determinism
from codemode.runtimes.warm_pool import WARM_ENV, warm_size_from_env

#: The string hashes depend on PYTHONHASHSEED, and so does the order of a set of strings.
CODE = "import sys\n[hash('codemode'), 'selectors' in sys.modules]"


async def _run(rt: PythonRuntime, determinism: Determinism) -> tuple[list, int | None]:
    execution = await rt.execute(CODE, functions={}, determinism=determinism)
    async with execution:
        result = await execution.next()
    assert isinstance(result, ExecutionResult)
    return result.output, execution.chosen_hash_seed


async def _until_ready(rt: PythonRuntime, n: int) -> None:
    assert rt.warm_pool is not None
    while rt.warm_pool.ready < n:  # (the test's own timeout bounds this)
        await asyncio.sleep(0.05)


async def test_a_first_start_takes_a_warm_interpreter_and_a_replay_gets_its_seed() -> None:
    rt = PythonRuntime(warm_interpreters=1)
    cold = PythonRuntime(warm_interpreters=0)
    try:
        d = Determinism(seed=12345)
        # the pool fills on its first use: this start is cold, with the determinism's seed
        (first_hash, _), seed = await _run(rt, d.first_start())
        assert seed is None
        assert rt.warm_pool is not None and rt.warm_pool.misses == 1
        await _until_ready(rt, 1)
        (warm_hash, warmed), seed = await _run(rt, d.first_start())
        assert rt.warm_pool.hits == 1
        assert seed is not None and seed != d.hash_seed
        assert warmed  # it imported what every run needs before the code came
        # A replay elsewhere (a cold interpreter) with the recorded seed hashes the same ...
        (replayed, cold_warmed), again = await _run(cold, d.with_hash_seed(seed))
        assert (replayed, again, cold_warmed) == (warm_hash, None, False)
        # ... and a replay never takes a warm interpreter (its determinism is not a first start)
        await _until_ready(rt, 1)
        assert await _run(rt, d.with_hash_seed(seed)) == ([warm_hash, False], None)
        assert await _run(rt, d) == ([first_hash, False], None)
        assert rt.warm_pool.hits == 1 and rt.warm_pool.ready == 1
    finally:
        await rt.aclose()
        await cold.aclose()
    assert rt.warm_pool.ready == 0  # closed with the runtime


async def test_no_warm_interpreter_for_a_session_or_mounts(tmp_path) -> None:
    from codemode.runtimes.types import SandboxOptions

    rt = PythonRuntime(warm_interpreters=1)
    try:
        assert rt.warm_pool is not None
        rt.warm_pool.refill()
        await _until_ready(rt, 1)
        options = SandboxOptions(mounts={str(tmp_path): "/data"})
        execution = await rt.execute(
            CODE, functions={}, determinism=Determinism(seed=1).first_start(), options=options
        )
        async with execution:
            await execution.next()
        assert execution.chosen_hash_seed is None and rt.warm_pool.hits == 0
        session = await rt.open_session(determinism=Determinism(seed=1).first_start())
        assert session is not None
        await session.close()
        assert rt.warm_pool.hits == 0 and rt.warm_pool.ready == 1
    finally:
        await rt.aclose()


def test_the_runner_and_the_pool_agree_on_the_ready_line() -> None:
    from codemode.runtimes.runner.bootstrap import RUNNER_PATH
    from codemode.runtimes.warm_pool import WARM_LINE

    assert f"WARM_LINE = {WARM_LINE!r}" in RUNNER_PATH.read_text()


def test_the_pool_size_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WARM_ENV, raising=False)
    assert warm_size_from_env() == 2
    monkeypatch.setenv(WARM_ENV, "0")
    assert PythonRuntime().warm_pool is None
    monkeypatch.setenv(WARM_ENV, "lots")
    with pytest.raises(ValueError, match="CODEMODE_PYTHON_WARM='lots'"):
        PythonRuntime()
    assert PythonRuntime(warm_interpreters=3).warm_pool.size == 3  # type: ignore[union-attr]
