"""PythonRuntime: real CPython in a bubblewrap sandbox, over both callback transports.

Real bwrap, real processes; each execution costs a process start (about 50 ms).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.runtimes import (
    CheckpointTier,
    CodeExecution,
    CodeResourceError,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTimeoutError,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
)
from codemode.runtimes.python import PythonRuntime
from codemode.runtimes.signatures import normalize_functions


def get_weather(city: str, days: int = 1) -> dict:
    """Weather for a city."""
    return {"city": city, "days": days, "temp": 20}


async def fetch(i: int) -> int:
    """Fetch item i."""
    return i * 10


def fail(kind: str) -> None: ...


TOOLS = normalize_functions({"get_weather": get_weather, "fetch": fetch, "fail": fail})


async def answer_all(calls: list[FunctionCall], execution: CodeExecution) -> None:
    for call in calls:
        if call.function_name == "fail":
            await execution.provide_error(call.args[0], "it broke", call_id=call.call_id)
        elif call.function_name == "fetch":
            await execution.provide_result(call.args[0] * 10, call_id=call.call_id)
        else:
            bound = TOOLS[call.function_name].bind(call.args, call.kwargs)
            await execution.provide_result(get_weather(**bound), call_id=call.call_id)


async def run(
    rt: PythonRuntime,
    code: str,
    *,
    inputs: dict[str, Any] | None = None,
    limits: ExecutionLimits | None = None,
    answer: Callable[[list[FunctionCall], CodeExecution], Awaitable[None]] = answer_all,
) -> tuple[ExecutionResult, list[list[FunctionCall]]]:
    """Drive an execution batch by batch; returns the result and every batch seen."""
    execution = await rt.execute(code, functions=TOOLS, inputs=inputs, limits=limits)
    batches: list[list[FunctionCall]] = []
    async with execution:
        while True:
            event = await execution.next_batch()
            if isinstance(event, ExecutionResult):
                return event, batches
            batches.append(event)
            await answer(event, execution)


@pytest.fixture(params=["stdio", "http"])
async def rt(request: pytest.FixtureRequest) -> AsyncIterator[PythonRuntime]:
    runtime = PythonRuntime(transport=request.param)
    try:
        yield runtime
    finally:
        await runtime.aclose()


@pytest.fixture
async def stdio_rt() -> AsyncIterator[PythonRuntime]:
    runtime = PythonRuntime()
    try:
        yield runtime
    finally:
        await runtime.aclose()


def _children() -> list[int]:
    """Live (or zombie) sandbox child processes (bwrap or the runner) of this test process.

    Other children (a session's Temporal server, Monty's pool, pyodide's warm Deno processes)
    are not ours to count."""
    kids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids += [int(p) for p in f.read().split()]
        except OSError:
            pass

    def is_sandbox(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            return False
        if comm == "deno":
            return False  # the pyodide runtime's warm pool (runner.mjs), kept for the session
        return comm == "bwrap" or b"bwrap" in cmd or b"runner" in cmd or not cmd  # zombies have no cmdline

    return [k for k in kids if is_sandbox(k)]


async def test_output_inputs_stdout_and_capabilities(rt: PythonRuntime) -> None:
    result, batches = await run(rt, "import sys\nprint('hello', a)\nprint('err', file=sys.stderr)\n{'sum': a + b}", inputs={"a": 1, "b": 2})
    assert result.output == {"sum": 3}
    assert result.stdout == "hello 1\nerr\n"
    assert not result.stdout_truncated and batches == [] and result.tool_calls == 0
    assert rt.capabilities.checkpoint_tier == CheckpointTier.JOURNAL
    assert rt.capabilities.third_party_packages and rt.constraints.supports_classes


async def test_sync_calls_keep_the_real_signature(rt: PythonRuntime) -> None:
    code = (
        "import inspect\n"
        "a = get_weather('Paris')\n"
        "b = get_weather(city='Oslo', days=3)\n"
        "[a, b, str(inspect.signature(get_weather)), get_weather.__doc__]"
    )
    result, batches = await run(rt, code)
    assert [[(c.call_id, c.function_name, c.args, c.kwargs, c.concurrent, c.line) for c in b] for b in batches] == [
        [("1", "get_weather", ["Paris"], {}, False, 2)],
        [("2", "get_weather", [], {"city": "Oslo", "days": 3}, False, 3)],
    ]
    assert result.output[0] == {"city": "Paris", "days": 1, "temp": 20}
    assert result.output[1]["days"] == 3
    assert result.output[2] == "(city: 'str', days: 'int' = 1) -> 'dict'"
    assert result.output[3] == "Weather for a city."
    assert result.tool_calls == 2


async def test_a_bad_call_is_pythons_own_type_error_at_the_call_site(rt: PythonRuntime) -> None:
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, "x = 1\nget_weather()\n")
    err = info.value
    assert err.error_type == "TypeError" and err.line == 2
    assert "get_weather() missing 1 required positional argument: 'city'" in err.message


async def test_gathered_async_calls_come_as_one_batch(rt: PythonRuntime) -> None:
    code = "import asyncio\nr = await asyncio.gather(*(fetch(i) for i in range(5)))\nr"
    result, batches = await run(rt, code)
    assert len(batches) == 1
    assert [(c.call_id, c.args, c.concurrent) for c in batches[0]] == [(str(i + 1), [i], True) for i in range(5)]
    assert result.output == [0, 10, 20, 30, 40]


async def test_asyncio_run_inside_the_code_also_batches(rt: PythonRuntime) -> None:
    code = (
        "import asyncio\n"
        "async def main():\n"
        "    return await asyncio.gather(fetch(1), fetch(2), fetch(3))\n"
        "asyncio.run(main())"
    )
    result, batches = await run(rt, code)
    assert [len(b) for b in batches] == [3]
    assert result.output == [10, 20, 30]


async def test_next_with_host_tasks_answering_concurrently(rt: PythonRuntime) -> None:
    """The ``next()`` style: each call handled by its own task, answered in reverse order."""
    execution = await rt.execute(
        "import asyncio\nawait asyncio.gather(fetch(1), fetch(2), fetch(3))", functions=TOOLS
    )
    tasks = []

    async def handle(call: FunctionCall) -> None:
        await asyncio.sleep(0.05 * (4 - call.args[0]))
        await execution.provide_result(call.args[0] * 100, call_id=call.call_id)

    async with execution:
        while True:
            event = await execution.next()
            if isinstance(event, ExecutionResult):
                break
            tasks.append(asyncio.create_task(handle(event)))
    await asyncio.gather(*tasks)
    assert event.output == [100, 200, 300]


async def test_tool_errors_raise_inside_the_code(rt: PythonRuntime) -> None:
    code = (
        "out = []\n"
        "try:\n    fail('ValueError')\nexcept ValueError as e:\n    out.append(str(e))\n"
        "try:\n    fail('ToolTimeout')\nexcept RuntimeError as e:\n    out.append(str(e))\n"
        "out"
    )
    result, _ = await run(rt, code)
    assert result.output == ["it broke", "ToolTimeout: it broke"]


async def test_uncaught_error_has_type_line_and_a_clean_traceback(rt: PythonRuntime) -> None:
    code = "def f(x):\n    return 1 / x\n\ny = 2\nf(0)\n"
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, code)
    err = info.value
    assert (err.error_type, err.message, err.line) == ("ZeroDivisionError", "division by zero", 2)
    assert err.traceback is not None
    assert 'File "<code>", line 5, in <module>' in err.traceback
    assert "return 1 / x" in err.traceback
    assert "runner" not in err.traceback and "<tools>" not in err.traceback
    # a tool error that escapes: the traceback ends in the user's code, not in a stub
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, "x = 1\nfail('KeyError')\n")
    assert info.value.error_type == "KeyError" and info.value.line == 2
    assert "runner" not in (info.value.traceback or "")


async def test_syntax_error_raises_from_execute(rt: PythonRuntime) -> None:
    with pytest.raises(CodeSyntaxError) as info:
        await rt.execute("x = 1\ny = (\n", functions=TOOLS)
    assert info.value.error_type == "SyntaxError" and info.value.line == 2
    assert "never closed" in info.value.message
    assert _children() == []


async def test_time_waiting_for_the_host_does_not_count(stdio_rt: PythonRuntime) -> None:
    async def slow(calls: list[FunctionCall], execution: CodeExecution) -> None:
        await asyncio.sleep(1.5)
        await answer_all(calls, execution)

    limits = ExecutionLimits(timeout_seconds=1)
    code = "import asyncio\na = get_weather('x')\nb = await asyncio.gather(fetch(1), fetch(2))\n[a['temp'], b]"
    result, _ = await run(stdio_rt, code, limits=limits, answer=slow)
    assert result.output == [20, [10, 20]]
    assert result.duration_ms < 1000


async def test_compute_time_limit(rt: PythonRuntime) -> None:
    started = time.monotonic()
    with pytest.raises(CodeTimeoutError) as info:
        await run(rt, "x = 0\nwhile True:\n    x += 1\n", limits=ExecutionLimits(timeout_seconds=0.5))
    assert info.value.line in (2, 3)
    assert time.monotonic() - started < 5


async def test_tool_call_limit(stdio_rt: PythonRuntime) -> None:
    with pytest.raises(CodeResourceError) as info:
        await run(stdio_rt, "for i in range(10):\n    fetch_sync = get_weather(str(i))\n", limits=ExecutionLimits(max_tool_calls=3))
    assert "too many tool calls" in info.value.message and info.value.line == 2


async def test_outputs_json_cannot_hold_are_converted(stdio_rt: PythonRuntime) -> None:
    result, _ = await run(stdio_rt, "import datetime\n({3, 1, 2}, (1, 2), b'hi', datetime.date(2024, 1, 2), float('inf'))")
    assert result.output == [[1, 2, 3], [1, 2], "hi", "2024-01-02", float("inf")]
    result, _ = await run(stdio_rt, "x = []\nx.append(x)\nx")
    assert result.output == "[[...]]"


async def test_installed_packages_import(stdio_rt: PythonRuntime) -> None:
    import pydantic_core

    result, _ = await run(stdio_rt, "import pydantic_core, json, sqlite3\npydantic_core.__version__")
    assert result.output == pydantic_core.__version__


async def test_call_ids_are_the_same_on_every_run(stdio_rt: PythonRuntime) -> None:
    code = "import asyncio\nget_weather('a')\nawait asyncio.gather(fetch(1), fetch(2))\nget_weather('b')"
    seen = []
    for _ in range(2):
        _, batches = await run(stdio_rt, code)
        seen.append([[(c.call_id, c.function_name, c.args) for c in b] for b in batches])
    assert seen[0] == seen[1]
    assert [[c[0] for c in b] for b in seen[0]] == [["1"], ["2", "3"], ["4"]]


async def test_dump_is_none_and_close_kills_the_process(stdio_rt: PythonRuntime) -> None:
    execution = await stdio_rt.execute("get_weather('x')\nwhile True:\n    pass\n", functions=TOOLS)
    call = await execution.next()
    assert isinstance(call, FunctionCall)
    assert execution.dump() is None
    assert _children() != []
    await execution.close()
    assert _children() == []  # killed and reaped: no zombie


async def test_runtime_aclose_kills_live_executions(monkeypatch: pytest.MonkeyPatch) -> None:
    # The callback sockets' folders go under a temp dir of this test's own (short: a socket's
    # path has a limit): /tmp is shared with the tests that run at the same time (one of theirs
    # was once counted as this runtime's leftover).
    tmp_path = Path(tempfile.mkdtemp(prefix="cb-test-"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    runtime = PythonRuntime(transport="http")
    executions = [await runtime.execute("get_weather('x')", functions=TOOLS) for _ in range(2)]
    for execution in executions:
        assert isinstance(await execution.next(), FunctionCall)
    assert any(d.name.startswith("codemode-cb-") for d in tmp_path.iterdir())  # (they were made here)
    await runtime.aclose()
    assert _children() == []
    leftovers = [d for d in tmp_path.iterdir() if d.name.startswith("codemode-cb-")]
    assert all(not (d / "callback.sock").exists() for d in leftovers), leftovers
    shutil.rmtree(tmp_path, ignore_errors=True)


async def test_no_isolation_is_an_explicit_loudly_warned_opt_in() -> None:
    with pytest.warns(RuntimeWarning, match="WITHOUT A SANDBOX"):
        runtime = PythonRuntime(isolation="none")
    try:
        result, batches = await run(runtime, "import os\nget_weather('Rome')['city'], os.environ.get('HOME')")
        assert result.output[0] == "Rome" and result.output[1].startswith("/tmp/codemode-run-")
        assert len(batches) == 1
    finally:
        await runtime.aclose()
    with pytest.raises(ValueError):
        PythonRuntime(isolation="docker")  # type: ignore[arg-type]


async def test_tcp_callbacks_need_the_host_network() -> None:
    from codemode.runtimes.transports.http import HttpCallbackTransport

    tcp = HttpCallbackTransport(unix_socket=False)
    runtime = PythonRuntime(transport=tcp)
    try:
        with pytest.raises(ValueError, match="cannot reach the host"):
            await runtime.execute("1", functions=TOOLS)
    finally:
        await runtime.aclose()
    runtime = PythonRuntime(transport=tcp, network=True)
    try:
        result, batches = await run(runtime, "import os\n[get_weather('Lima')['city'], os.path.exists('/etc/resolv.conf')]")
        assert result.output[0] == "Lima" and len(batches) == 1
        assert runtime.capabilities.network
    finally:
        await runtime.aclose()
    assert _children() == []


async def test_stdout_so_far_is_visible_at_every_step(rt: PythonRuntime) -> None:
    code = "import asyncio\nprint('one')\nget_weather('x')\nprint('two')\nawait asyncio.gather(fetch(1), fetch(2))\nprint('three')"
    execution = await rt.execute(code, functions=TOOLS)
    seen = []
    async with execution:
        while not isinstance(event := await execution.next_batch(), ExecutionResult):
            seen.append(execution.stdout)
            await answer_all(event, execution)
    assert seen == ["one\n", "one\ntwo\n"]
    assert event.stdout == execution.stdout == "one\ntwo\nthree\n"


async def test_type_check_is_a_syntax_check_without_a_process(stdio_rt: PythonRuntime) -> None:
    await stdio_rt.type_check("x = await fetch(1)\nx", TOOLS)
    with pytest.raises(CodeSyntaxError) as info:
        await stdio_rt.type_check("def f():\n    pass\nreturn 1\n", TOOLS)
    assert info.value.line == 3 and "outside function" in info.value.message
    assert _children() == []
