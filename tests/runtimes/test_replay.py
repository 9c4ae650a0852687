"""Journal replay on a fresh execution, for the Python runtime and for Monty.

A run is recorded once (every call and its outcome, as the workflow journals them), then a
fresh execution is driven through a prefix of that journal: it must reach exactly the
state the original run was in, without running any journaled tool again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from codemode.runtimes import CodeRuntime, ExecutionResult, FunctionCall, NonDeterminismError
from codemode.runtimes.journal_replay import JournalEntry, replay
from codemode.runtimes.signatures import normalize_functions

from .conftest import RUNTIME_FACTORIES


def lookup(key: str) -> int:
    """Look a key up."""
    raise NotImplementedError


async def fetch(i: int) -> int:
    """Fetch item i."""
    raise NotImplementedError


TOOLS = normalize_functions({"lookup": lookup, "fetch": fetch})

# Runs on Monty and CPython alike: sync calls, a caught tool error, a gathered batch.
CODE = """\
import asyncio
a = lookup('a')
try:
    b = lookup('missing')
except KeyError as e:
    b = -1
print('a', a, 'b', b)
items = await asyncio.gather(fetch(1), fetch(2), fetch(3))
c = lookup('c')
[a, b, items, c]
"""


class Tools:
    """Host tools that count their runs, so a test can prove replay ran none."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, list[Any]]] = []

    def __call__(self, call: FunctionCall) -> JournalEntry:
        self.runs.append((call.function_name, list(call.args)))
        if call.function_name == "fetch":
            return JournalEntry.returned(call, call.args[0] * 10)
        if call.args[0] == "missing":
            return JournalEntry.raised(call, "KeyError", "missing")
        return JournalEntry.returned(call, len(call.args[0]) + 100)


async def answer(execution: Any, entry: JournalEntry) -> None:
    outcome = entry.outcome()
    if outcome.kind == "result":
        await execution.provide_result(outcome.value, call_id=entry.call_id)
    else:
        await execution.provide_error(outcome.exc_type, outcome.message, call_id=entry.call_id)


async def record(rt: CodeRuntime, code: str, tools: Tools) -> tuple[ExecutionResult, list[JournalEntry], list[list[str]]]:
    """Run to the end, journaling every call; also returns the call ids of each batch."""
    journal: list[JournalEntry] = []
    batches: list[list[str]] = []
    execution = await rt.execute(code, functions=TOOLS)
    async with execution:
        while True:
            event = await execution.next_batch()
            if isinstance(event, ExecutionResult):
                return event, journal, batches
            batches.append([c.call_id for c in event])
            for call in event:
                entry = tools(call)
                journal.append(entry)
                await answer(execution, entry)


async def finish(execution: Any, event: list[FunctionCall] | ExecutionResult, tools: Tools) -> ExecutionResult:
    while not isinstance(event, ExecutionResult):
        for call in event:
            await answer(execution, tools(call))
        event = await execution.next_batch()
    return event


#: Journal replay is generic: one runtime without checkpoints, one with.
FACTORIES: dict[str, Callable[[], Any]] = {name: RUNTIME_FACTORIES[name] for name in ("monty", "python-stdio")}


@pytest.fixture(params=sorted(FACTORIES))
async def rt(request: pytest.FixtureRequest) -> AsyncIterator[CodeRuntime]:
    async with FACTORIES[request.param]() as runtime:
        yield runtime


async def test_full_journal_reaches_the_same_result_without_running_tools(rt: CodeRuntime) -> None:
    tools = Tools()
    original, journal, batches = await record(rt, CODE, tools)
    assert original.output == [101, -1, [10, 20, 30], 101]
    assert [len(b) for b in batches] == [1, 1, 3, 1]  # the gather is one batch
    runs = len(tools.runs)
    execution = await rt.execute(CODE, functions=TOOLS)
    async with execution:
        result = await replay(execution, journal)
    assert isinstance(result, ExecutionResult)
    assert (result.output, result.stdout) == (original.output, original.stdout)
    assert len(tools.runs) == runs  # no tool ran during replay


@pytest.mark.parametrize("cut", [1, 2, 5])
async def test_a_journal_prefix_resumes_where_the_run_stopped(rt: CodeRuntime, cut: int) -> None:
    tools = Tools()
    original, journal, batches = await record(rt, CODE, tools)
    flat = [cid for batch in batches for cid in batch]
    # What the original run showed right after its first `cut` calls were answered.
    expected_next = next(batch for batch in batches if flat.index(batch[0]) >= cut)
    tools.runs.clear()
    execution = await rt.execute(CODE, functions=TOOLS)
    async with execution:
        event = await replay(execution, journal[:cut])
        assert isinstance(event, list)
        assert [c.call_id for c in event] == expected_next
        assert [c.call_id for c in execution.pending_calls] == expected_next
        result = await finish(execution, event, tools)
    assert (result.output, result.stdout) == (original.output, original.stdout)
    assert len(tools.runs) == len(journal) - cut  # only the calls beyond the journal ran


async def test_a_partly_recorded_gather_returns_only_the_missing_calls(rt: CodeRuntime) -> None:
    tools = Tools()
    original, journal, batches = await record(rt, CODE, tools)
    gather = next(b for b in batches if len(b) == 3)
    missing = gather[1]
    partial = [e for e in journal if e.call_id != missing and journal.index(e) < len(journal) - 1]
    execution = await rt.execute(CODE, functions=TOOLS)
    async with execution:
        event = await replay(execution, partial)
        assert isinstance(event, list) and [c.call_id for c in event] == [missing]
        assert event[0].function_name == "fetch"
        result = await finish(execution, event, tools)
    assert result.output == original.output


async def test_a_different_call_is_a_clear_nondeterminism_error(rt: CodeRuntime) -> None:
    tools = Tools()
    _, journal, _ = await record(rt, CODE, tools)
    tampered = [journal[0].model_copy(update={"args": ["b"]}), *journal[1:]]
    execution = await rt.execute(CODE, functions=TOOLS)
    with pytest.raises(NonDeterminismError) as info:
        await replay(execution, tampered)
    message = str(info.value)
    assert "lookup('a')" in message and "lookup('b')" in message and f"call {journal[0].call_id} " in message
    assert info.value.kind == "nondeterminism"
    with pytest.raises(Exception):
        await execution.next_batch()  # closed


async def test_unmade_recorded_calls_are_a_nondeterminism_error(rt: CodeRuntime) -> None:
    tools = Tools()
    _, journal, _ = await record(rt, "lookup('a')", tools)
    extra = JournalEntry(call_id="9", function_name="lookup", args=["z"], result=1)
    execution = await rt.execute("lookup('a')", functions=TOOLS)
    with pytest.raises(NonDeterminismError, match="without making 1 recorded call"):
        await replay(execution, [*journal, extra])


async def test_entries_may_be_plain_mappings(rt: CodeRuntime) -> None:
    code = "lookup('a') + lookup('bb')"
    original, journal, _ = await record(rt, code, Tools())
    execution = await rt.execute(code, functions=TOOLS)
    async with execution:
        result = await replay(execution, [e.model_dump(mode="json") for e in journal])
    assert isinstance(result, ExecutionResult) and result.output == original.output == 203


async def test_python_code_reading_os_entropy_is_caught() -> None:
    """``random`` is seeded per execution (see test_determinism.py); the OS's entropy is not
    replay-safe, and replay says so."""
    code = "import os\nlookup(os.urandom(8).hex())"
    async with RUNTIME_FACTORIES["python-stdio"]() as rt:
        tools = Tools()
        _, journal, _ = await record(rt, code, tools)
        execution = await rt.execute(code, functions=TOOLS)
        with pytest.raises(NonDeterminismError, match="random|clock"):
            await replay(execution, journal)
