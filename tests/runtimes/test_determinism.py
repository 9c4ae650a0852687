"""Replay that survives randomness and the clock (``codemode.runtimes.types.Determinism``).

A program that draws random numbers, reads the clock, makes uuids and iterates a set of
strings between its tool calls is recorded once, then rebuilt by journal replay in a
fresh process (a fresh sandbox for e2b): with the same ``Determinism`` it makes exactly
the same calls, so replay answers them all from the journal and reaches the same result.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemode.runtimes import CodeRuntime, Determinism, ExecutionResult, NonDeterminismError
from codemode.runtimes.journal_replay import JournalEntry, replay

from .conftest import RUNTIME_FACTORIES

HANG_GUARD_S = 60.0
EPOCH = 1_760_000_000.25  # 2025-10-09, a Thursday


def lookup(key: str) -> int:
    """Look a key up."""
    raise NotImplementedError


TOOLS = {"lookup": lookup}

#: Randomness, the wall clock, uuids and set order between tool calls.
CPYTHON_CODE = """
import random, time, datetime, uuid
cities = ["Paris", "Oslo", "Lima", "Rome", "Cairo", "Quito", "Perth"]
city = random.choice(cities)
lookup(city)
stamp = datetime.datetime.now().isoformat()
day = datetime.date.today().isoformat()
t = time.time()
lookup(f"{stamp}|{day}|{t:.6f}|{uuid.uuid4()}|{time.strftime('%Y')}")
for tag in {"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}:
    lookup(tag)
rng = random.Random()
time.sleep(0.01)
lookup(f"{rng.randint(1, 10**9)}|{random.random()}|{time.time() - t:.6f}")
[city, t]
"""

#: What Monty runs of it (no uuid, no unseeded Random()).
MONTY_CODE = """
import random, time, datetime
cities = ["Paris", "Oslo", "Lima", "Rome", "Cairo", "Quito", "Perth"]
city = random.choice(cities)
lookup(city)
t = time.time()
lookup(datetime.datetime.now().isoformat() + "|" + str(t))
lookup(str(random.randint(1, 10**9)))
[city, t]
"""


async def record(
    rt: CodeRuntime, code: str, determinism: Determinism | None
) -> tuple[ExecutionResult, list[JournalEntry]]:
    """Run to the end, answering every call (len(key) + 100) and journaling it."""
    journal: list[JournalEntry] = []
    execution = await rt.execute(code, functions=TOOLS, determinism=determinism)
    async with execution:
        while True:
            event = await asyncio.wait_for(execution.next_batch(), HANG_GUARD_S)
            if isinstance(event, ExecutionResult):
                return event, journal
            for call in event:
                entry = JournalEntry.returned(call, len(call.args[0]) + 100)
                journal.append(entry)
                await execution.provide_result(entry.result, call_id=call.call_id)


async def replayed(rt: CodeRuntime, code: str, journal: list[JournalEntry], determinism: Determinism | None) -> Any:
    execution = await rt.execute(code, functions=TOOLS, determinism=determinism)
    async with execution:
        return await asyncio.wait_for(replay(execution, journal), HANG_GUARD_S)


FACTORIES: dict[str, Callable[[], Any]] = {
    name: RUNTIME_FACTORIES[name] for name in ("python-stdio", "e2b", "monty", "docker", "pyodide")
}


@pytest.fixture(params=sorted(FACTORIES))
async def rt(request: pytest.FixtureRequest) -> AsyncIterator[CodeRuntime]:
    async with FACTORIES[request.param]() as runtime:
        yield runtime


async def test_random_clock_uuid_and_set_order_replay_to_the_same_calls(rt: CodeRuntime) -> None:
    code = MONTY_CODE if rt.name == "monty" else CPYTHON_CODE
    determinism = Determinism(seed=424242, epoch=EPOCH)
    original, journal = await record(rt, code, determinism)
    again = await replayed(rt, code, journal, determinism)  # a fresh process answered from the journal
    assert isinstance(again, ExecutionResult)
    assert again.output == original.output
    city, t = original.output
    assert EPOCH <= t < EPOCH + 1  # the clock the code read is the execution's, not the host's
    stamp = journal[1].args[0].split("|")[0]
    assert stamp.startswith(datetime.datetime.fromtimestamp(EPOCH, tz=datetime.timezone.utc).strftime("%Y-%m-%d"))
    # Another seed draws other numbers: the values come from the seed, not from constants.
    other, _ = await record(rt, code, Determinism(seed=7, epoch=EPOCH))
    assert [e.args for e in journal] != [e.args for e in _] or other.output != original.output


@pytest.mark.parametrize("name", ["python-stdio", "e2b", "docker", "pyodide"])
async def test_random_replays_with_the_default_seed(name: str) -> None:
    """Without a Determinism (what a caller that passes none gets) the seed derives from the
    code and its inputs: random draws still replay."""
    code = "import random\nlookup(str(random.random()))\nlookup(str(random.getrandbits(64)))"
    async with RUNTIME_FACTORIES[name]() as runtime:
        original, journal = await record(runtime, code, None)
        again = await replayed(runtime, code, journal, None)
    assert isinstance(again, ExecutionResult) and again.output == original.output


async def test_the_real_clock_is_not_replay_safe() -> None:
    """With no epoch the code reads the real clock: a replay sees another time, and says so."""
    code = "import time\nlookup(repr(time.time()))"
    async with RUNTIME_FACTORIES["python-stdio"]() as runtime:
        _, journal = await record(runtime, code, Determinism(seed=1))
        with pytest.raises(NonDeterminismError, match="clock"):
            await replayed(runtime, code, journal, Determinism(seed=1))


async def test_virtual_clock_is_monotonic_and_sleep_advances_it() -> None:
    code = """
import time, datetime
a = time.time(); b = time.time(); ns = time.time_ns()
time.sleep(0.5)
c = time.time()
now = datetime.datetime.now(datetime.timezone.utc)
[a, b, ns, c, now.timestamp(), isinstance(now, datetime.datetime), type(now).__name__,
 time.gmtime().tm_year, datetime.datetime.utcnow().year]
"""
    async with RUNTIME_FACTORIES["python-stdio"]() as runtime:
        result, _ = await record(runtime, code, Determinism(seed=1, epoch=EPOCH))
    a, b, ns, c, now, is_datetime, type_name, year, utc_year = result.output
    assert EPOCH < a < b < ns / 1e9 < c
    assert 0.5 <= c - a < 0.51  # sleeping moves the clock by exactly the sleep (plus ticks)
    assert c < now < c + 0.01
    assert is_datetime and type_name == "datetime"
    assert year == utc_year == 2025


def test_hash_seed_is_a_valid_pythonhashseed() -> None:
    for seed in (0, 1, 4294967294, 4294967295, 2**63 - 1):
        assert Determinism(seed=seed).hash_seed in range(1, 2**32)
    # The seed derived from code and inputs is the same in another interpreter (another
    # PYTHONHASHSEED): a worker that replays the run elsewhere derives the same one.
    probe = "from codemode.runtimes import Determinism; print(Determinism.derived('x = 1', {'a': 1}).seed)"
    elsewhere = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONHASHSEED": "12345"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert Determinism.derived("x = 1", {"a": 1}).seed == int(elsewhere.stdout)
    assert Determinism.derived("x = 1", {"a": 1}) != Determinism.derived("x = 1", {"a": 2})


async def test_a_replayed_call_still_differs_when_the_code_does() -> None:
    """Determinism does not hide real divergence: a different first call is still caught."""
    async with RUNTIME_FACTORIES["python-stdio"]() as runtime:
        _, journal = await record(runtime, "import random\nlookup(random.choice('abc'))", Determinism(seed=3))
        tampered = [journal[0].model_copy(update={"args": ["zz"]})]
        with pytest.raises(NonDeterminismError):
            await replayed(runtime, "import random\nlookup(random.choice('abc'))", tampered, Determinism(seed=3))


async def test_extensions_see_the_real_datetime_while_the_code_sees_the_clock() -> None:
    """C extensions import ``datetime.datetime`` from ``sys.modules`` and need the real static
    type (pandas' Cython type import fails or crashes on a subclass); only the code's own
    ``import datetime`` sees the virtual clock, and what it makes is a real ``datetime``."""
    code = """
import sys, datetime, pickle
from datetime import datetime as DT
real = sys.modules["datetime"].datetime
now = DT.now()
made = datetime.datetime(2024, 5, 1, 12, 0)
[type(real).__name__, DT == real, hash(DT) == hash(real), {real: 1}.get(DT), type(now) is real,
 type(made) is real, isinstance(made, DT), issubclass(real, DT), now.timestamp(),
 pickle.loads(pickle.dumps(made)) == made, datetime.datetime.fromisoformat("2024-05-01").year]
"""
    async with RUNTIME_FACTORIES["python-stdio"]() as runtime:
        result, _ = await record(runtime, code, Determinism(seed=1, epoch=EPOCH))
    meta, equal, same_hash, found, now_real, made_real, is_instance, is_subclass, stamp, pickled, year = result.output
    assert meta == "type"  # sys.modules["datetime"] keeps the real class
    assert equal and same_hash and found == 1 and now_real and made_real and is_instance and is_subclass
    assert EPOCH < stamp < EPOCH + 1 and pickled and year == 2024


async def test_numpy_randomness_replays() -> None:
    """numpy's global generator and an unseeded ``default_rng()`` draw from the execution's
    seed, so a journal replay of code that passes their draws to a tool makes the same calls."""
    pytest.importorskip("numpy")
    code = (
        "import numpy as np\n"
        "lookup(repr(np.random.rand(3).tolist()))\n"
        "lookup(repr(np.random.default_rng().integers(0, 10**9, 3).tolist()))\n"
        "lookup(repr(np.random.default_rng(5).random()))\n"
    )
    async with RUNTIME_FACTORIES["python-stdio"]() as runtime:
        original, journal = await record(runtime, code, Determinism(seed=11, epoch=EPOCH))
        again = await replayed(runtime, code, journal, Determinism(seed=11, epoch=EPOCH))
        other, other_journal = await record(runtime, code, Determinism(seed=12, epoch=EPOCH))
    assert isinstance(again, ExecutionResult)
    assert [e.args for e in journal][:2] != [e.args for e in other_journal][:2]
    assert journal[2].args == other_journal[2].args  # an explicit seed is the code's own
