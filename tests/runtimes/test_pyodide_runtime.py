"""PyodideRuntime: CPython in WebAssembly in a real Deno process, beyond the contract suite.

Most tests share the session's runtime (``shared_pyodide``): its pool keeps a process
loaded from the snapshot, so an execution does not wait for one to start.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from codemode.runtimes import (
    CapabilityError,
    CheckpointTier,
    CodeExecution,
    CodeRuntimeError,
    CodeSyntaxError,
    Determinism,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    code_mode_prompt,
)
from codemode.runtimes.pyodide import PyodideRuntime
from codemode.runtimes.signatures import normalize_functions
from codemode.runtimes.types import SandboxOptions
from codemode.runtimes.wasm.distribution import PYODIDE_VERSION

from .conftest import shared_pyodide


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
    rt: PyodideRuntime,
    code: str,
    *,
    inputs: dict[str, Any] | None = None,
    limits: ExecutionLimits | None = None,
    determinism: Determinism | None = None,
    options: SandboxOptions | None = None,
    answer: Callable[[list[FunctionCall], CodeExecution], Awaitable[None]] = answer_all,
) -> tuple[ExecutionResult, list[list[FunctionCall]]]:
    execution = await rt.execute(
        code, functions=TOOLS, inputs=inputs, limits=limits, determinism=determinism, options=options
    )
    batches: list[list[FunctionCall]] = []
    async with execution:
        while True:
            event = await asyncio.wait_for(execution.next_batch(), 60)
            if isinstance(event, ExecutionResult):
                return event, batches
            batches.append(event)
            await answer(event, execution)


@pytest.fixture
async def rt() -> AsyncIterator[PyodideRuntime]:
    runtime = shared_pyodide()
    try:
        yield runtime
    finally:
        await runtime.close_executions()


def _deno_children() -> list[int]:
    kids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                kids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    found = []
    for pid in kids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"runner.mjs" in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


async def test_output_inputs_stdout_capabilities_and_prompt(rt: PyodideRuntime) -> None:
    code = "import sys\nprint('hello', a)\nprint('err', file=sys.stderr)\n{'sum': a + b, 'v': sys.version_info[:2]}"
    result, batches = await run(rt, code, inputs={"a": 1, "b": 2})
    assert result.output == {"sum": 3, "v": [3, 14]}
    assert result.stdout == "hello 1\nerr\n"
    assert batches == [] and result.tool_calls == 0
    caps = rt.capabilities
    assert caps.checkpoint_tier == CheckpointTier.JOURNAL and caps.third_party_packages
    assert not caps.filesystem and not caps.network
    prompt = code_mode_prompt("pyodide", TOOLS)
    assert "WebAssembly" in prompt and "no network" in prompt and "no subprocesses" in prompt
    assert "def get_weather(city: str, days: int = 1) -> dict:" in prompt


async def test_sync_calls_keep_the_real_signature_and_work_anywhere(rt: PyodideRuntime) -> None:
    code = (
        "import inspect\n"
        "a = get_weather('Paris')\n"
        "b = get_weather(city='Oslo', days=3)\n"
        "ranked = sorted(['Lima', 'Rome'], key=lambda c: get_weather(c, days=2)['days'])\n"  # a call inside C code
        "gen = list(get_weather(c)['city'] for c in ['X'])\n"
        "[a, b, ranked, gen, str(inspect.signature(get_weather)), get_weather.__doc__]"
    )
    result, batches = await run(rt, code)
    assert [[(c.call_id, c.function_name, c.args, c.kwargs, c.concurrent, c.line) for c in b] for b in batches] == [
        [("1", "get_weather", ["Paris"], {}, False, 2)],
        [("2", "get_weather", [], {"city": "Oslo", "days": 3}, False, 3)],
        [("3", "get_weather", ["Lima"], {"days": 2}, False, 4)],
        [("4", "get_weather", ["Rome"], {"days": 2}, False, 4)],
        [("5", "get_weather", ["X"], {}, False, 5)],
    ]
    assert result.output[0] == {"city": "Paris", "days": 1, "temp": 20}
    assert result.output[1]["days"] == 3 and result.output[2:4] == [["Lima", "Rome"], ["X"]]
    assert result.output[4] == "(city: 'str', days: 'int' = 1) -> 'dict'"
    assert result.output[5] == "Weather for a city."


async def test_a_bad_call_is_pythons_own_type_error_at_the_call_site(rt: PyodideRuntime) -> None:
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, "x = 1\nget_weather()\n")
    err = info.value
    assert err.error_type == "TypeError" and err.line == 2
    assert "get_weather() missing 1 required positional argument: 'city'" in err.message


async def test_gathered_async_calls_come_as_one_batch(rt: PyodideRuntime) -> None:
    code = "import asyncio\nr = await asyncio.gather(*(fetch(i) for i in range(5)))\nr"
    result, batches = await run(rt, code)
    assert len(batches) == 1
    assert [(c.call_id, c.args, c.concurrent) for c in batches[0]] == [(str(i + 1), [i], True) for i in range(5)]
    assert result.output == [0, 10, 20, 30, 40]
    # asyncio.run inside the code batches too; a sync call between gathers
    code = (
        "import asyncio\n"
        "async def main():\n"
        "    first = await asyncio.gather(fetch(1), fetch(2), fetch(3))\n"
        "    middle = get_weather('x')['temp']\n"
        "    return first + [middle] + await asyncio.gather(fetch(4), fetch(5))\n"
        "asyncio.run(main())"
    )
    result, batches = await run(rt, code)
    assert [len(b) for b in batches] == [3, 1, 2]
    assert result.output == [10, 20, 30, 20, 40, 50]


async def test_the_event_loop_keeps_asyncios_order_with_batched_callbacks(rt: PyodideRuntime) -> None:
    """guest.py runs ready callbacks in batches and hands answers over in batches: the order
    asyncio promises (FIFO callbacks, timers by deadline, cancelled handles skipped) holds,
    an exception in a task stays in it, and a sync call from a task still works."""
    code = (
        "import asyncio\n"
        "trace, seen = [], []\n"
        "async def step(i):\n"
        "    trace.append(('a', i))\n"
        "    await asyncio.sleep(0)\n"
        "    trace.append(('b', i))\n"
        "    v = await fetch(i)\n"
        "    trace.append(('c', i))\n"
        "    return v\n"
        "async def late(delay, tag):\n"
        "    await asyncio.sleep(delay)\n"
        "    trace.append(tag)\n"
        "    return tag\n"
        "async def boom():\n"
        "    await asyncio.sleep(0)\n"
        "    raise ValueError('boom')\n"
        "async def sync_in_task():\n"
        "    return get_weather('x')['temp']\n"
        "loop = asyncio.get_running_loop()\n"
        "loop.call_soon(seen.append, 1)\n"
        "loop.call_soon(seen.append, 2).cancel()\n"
        "loop.call_soon(seen.append, 3)\n"
        "r = await asyncio.gather(step(1), step(2), late(0.05, 'slow'), late(0.01, 'fast'), boom(), sync_in_task(),\n"
        "                         return_exceptions=True)\n"
        "[r[:4], repr(r[4]), r[5], seen, trace]"
    )
    result, _ = await run(rt, code)
    head, error, temp, seen, trace = result.output
    assert head == [10, 20, "slow", "fast"] and error == "ValueError('boom')" and temp == 20 and seen == [1, 3]
    trace = [tuple(t) if isinstance(t, list) else t for t in trace]
    assert trace[:2] == [("a", 1), ("a", 2)]
    assert trace.index(("b", 1)) < trace.index(("b", 2)) and trace.index("fast") < trace.index("slow")
    assert sorted(map(str, trace)) == sorted(
        map(str, [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1), ("c", 2), "fast", "slow"])
    )


async def test_many_gathered_answers_in_any_order_reach_their_calls(rt: PyodideRuntime) -> None:
    """Answers to async calls arrive in any order and any grouping (several in one read of
    the pipe, or one at a time): each reaches its own call."""

    async def backwards(calls: list[FunctionCall], execution: CodeExecution) -> None:
        for i, call in enumerate(reversed(calls)):
            await execution.provide_result(call.args[0] * 10, call_id=call.call_id)
            if i % 7 == 0:
                await asyncio.sleep(0.01)  # the runner gets some answers alone

    code = "import asyncio\nr = await asyncio.gather(*(fetch(i) for i in range(60)))\nr"
    result, batches = await run(rt, code, answer=backwards)
    assert [len(b) for b in batches] == [60]
    assert result.output == [i * 10 for i in range(60)]


async def test_next_with_host_tasks_answering_concurrently(rt: PyodideRuntime) -> None:
    execution = await rt.execute("import asyncio\nawait asyncio.gather(fetch(1), fetch(2), fetch(3))", functions=TOOLS)
    tasks = []

    async def handle(call: FunctionCall) -> None:
        await asyncio.sleep(0.05 * (4 - call.args[0]))
        await execution.provide_result(call.args[0] * 100, call_id=call.call_id)

    async with execution:
        while True:
            event = await asyncio.wait_for(execution.next(), 60)
            if isinstance(event, ExecutionResult):
                break
            tasks.append(asyncio.create_task(handle(event)))
    await asyncio.gather(*tasks)
    assert event.output == [100, 200, 300]


async def test_errors_are_in_band_with_lines_and_clean_tracebacks(rt: PyodideRuntime) -> None:
    code = (
        "out = []\n"
        "try:\n    fail('ValueError')\nexcept ValueError as e:\n    out.append(str(e))\n"
        "try:\n    fail('ToolTimeout')\nexcept RuntimeError as e:\n    out.append(str(e))\n"
        "out"
    )
    result, _ = await run(rt, code)
    assert result.output == ["it broke", "ToolTimeout: it broke"]
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, "def f(x):\n    return 1 / x\n\ny = 2\nf(0)\n")
    err = info.value
    assert (err.error_type, err.message, err.line) == ("ZeroDivisionError", "division by zero", 2)
    assert err.traceback is not None and 'File "<code>", line 5, in <module>' in err.traceback
    assert "return 1 / x" in err.traceback
    for ours in ("codemode_runner", "codemode_guest", "pyodide", "<tools>"):
        assert ours not in err.traceback
    with pytest.raises(CodeRuntimeError) as info:
        await run(rt, "x = 1\nfail('KeyError')\n")
    assert info.value.error_type == "KeyError" and info.value.line == 2
    assert "codemode_runner" not in (info.value.traceback or "")


async def test_syntax_error_raises_from_execute(rt: PyodideRuntime) -> None:
    with pytest.raises(CodeSyntaxError) as info:
        await rt.execute("x = 1\ny = (\n", functions=TOOLS)
    assert info.value.error_type == "SyntaxError" and info.value.line == 2
    assert "never closed" in info.value.message
    # Python 3.14's grammar, whatever the host's interpreter
    result, _ = await run(rt, "def first[T](xs: list[T]) -> T:\n    return xs[0]\nfirst([7, 8])")
    assert result.output == 7


async def test_time_waiting_for_the_host_does_not_count(rt: PyodideRuntime) -> None:
    async def slow(calls: list[FunctionCall], execution: CodeExecution) -> None:
        await asyncio.sleep(1.5)
        await answer_all(calls, execution)

    limits = ExecutionLimits(timeout_seconds=1)
    code = "import asyncio\na = get_weather('x')\nb = await asyncio.gather(fetch(1), fetch(2))\n[a['temp'], b]"
    result, _ = await run(rt, code, limits=limits, answer=slow)
    assert result.output == [20, [10, 20]]
    assert result.duration_ms < 1000


async def test_outputs_json_cannot_hold_are_converted(rt: PyodideRuntime) -> None:
    result, _ = await run(rt, "import datetime\n({3, 1, 2}, (1, 2), b'hi', datetime.date(2024, 1, 2), float('inf'))")
    assert result.output == [[1, 2, 3], [1, 2], "hi", "2024-01-02", float("inf")]
    result, _ = await run(rt, "x = []\nx.append(x)\nx")
    assert result.output == "[[...]]"


async def test_close_kills_the_process_and_aclose_the_pool() -> None:
    runtime = PyodideRuntime(pool_size=1)
    try:
        execution = await runtime.execute("get_weather('x')\nwhile True:\n    pass\n", functions=TOOLS)
        assert isinstance(await execution.next(), FunctionCall)
        assert execution.dump() is None
        (run,) = runtime._live
        busy = run.proc.process.pid
        assert busy in _deno_children()
        await execution.close()
        await runtime.warm()  # the replacement the pool started when the execution ended
        warm = {t.result().process.pid for group in runtime._pool._warm.values() for t in group}
        assert warm and busy not in warm
    finally:
        await runtime.aclose()
    assert not ({busy} | warm) & set(_deno_children())  # killed and reaped: no zombie


async def test_options_the_runtime_cannot_honour_are_refused_up_front(rt: PyodideRuntime, tmp_path: Path) -> None:
    for options in (
        SandboxOptions(network="full"),
        SandboxOptions(network="ratchet"),
        SandboxOptions(mounts={str(tmp_path / "nowhere"): "/data"}),
        SandboxOptions(mounts={str(tmp_path): "/lib"}),
    ):
        with pytest.raises(CapabilityError):
            await rt.execute("1", functions=TOOLS, options=options)
    with pytest.raises(CapabilityError, match="at least 48 MiB"):
        await rt.execute("1", functions=TOOLS, limits=ExecutionLimits(max_memory_bytes=16 * 2**20))


async def test_read_only_mounts(rt: PyodideRuntime, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    (skills / "nested").mkdir(parents=True)
    (skills / "hello.txt").write_text("hello from the host\n")
    (skills / "nested" / "data.json").write_text('{"rows": 3}')
    code = (
        "import json, os\n"
        "def attempt(fn):\n"
        "    try:\n        fn()\n        return 'allowed'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "[open('/skills/hello.txt').read().strip(), json.load(open('/skills/nested/data.json'))['rows'],\n"
        " sorted(os.listdir('/skills')), attempt(lambda: open('/skills/hello.txt', 'w').write('x')),\n"
        " attempt(lambda: open('/skills/new.txt', 'w')), attempt(lambda: os.remove('/skills/hello.txt'))]"
    )
    result, _ = await run(rt, code, options=SandboxOptions(mounts={str(skills): "/skills"}))
    assert result.output == ["hello from the host", 3, ["hello.txt", "nested"]] + ["PermissionError"] * 3
    assert (skills / "hello.txt").read_text() == "hello from the host\n" and not (skills / "new.txt").exists()


# -- packages ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def package_rt() -> AsyncIterator[PyodideRuntime]:
    runtime = PyodideRuntime(pool_size=0)  # processes with packages start on demand only
    try:
        yield runtime
    finally:
        await runtime.aclose()


async def test_pure_python_and_pyodide_abi_packages(package_rt: PyodideRuntime) -> None:
    code = (
        "from tabulate import tabulate\n"
        "import pydantic, pydantic_core\n"
        "class City(pydantic.BaseModel):\n"
        "    city: str\n"
        "    temp: int\n"
        "c = City.model_validate(get_weather('Oslo'))\n"
        "try:\n    City(city='x', temp='warm')\n    bad = None\nexcept pydantic.ValidationError as e:\n    bad = e.error_count()\n"
        "[tabulate([[c.city, c.temp]], tablefmt='plain'), bad, pydantic_core.__file__.endswith('.py')]"
    )
    result, batches = await run(package_rt, code, options=SandboxOptions(packages=["tabulate", "pydantic"]))
    assert result.output == ["Oslo  20", 1, True]
    assert len(batches) == 1


async def test_an_unavailable_package_is_refused_before_anything_starts(
    package_rt: PyodideRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.runtimes.wasm.deno import DenoProcess

    await package_rt.warm()  # Deno, Pyodide and the snapshot are there: only the package is missing
    spawned: list[object] = []
    real_spawn = DenoProcess.spawn

    async def spawn(*args: Any, **kwargs: Any) -> DenoProcess:
        spawned.append(args)
        return await real_spawn(*args, **kwargs)

    monkeypatch.setattr(DenoProcess, "spawn", spawn)
    with pytest.raises(CapabilityError) as info:
        await package_rt.execute("import numpy", functions=TOOLS, options=SandboxOptions(packages=["numpy"]))
    assert "numpy" in info.value.message and "pyemscripten" in info.value.message
    assert "distribution" in info.value.message  # what would provide it
    assert spawned == []  # no process was started for it


async def test_preloaded_packages_are_in_the_snapshot_and_compiled_ones_are_refused(tmp_path: Path) -> None:
    compiled = PyodideRuntime(packages=["pydantic"], pool_size=0)
    try:
        with pytest.raises(CapabilityError, match="pydantic_core"):
            await compiled.execute("1", functions=TOOLS)
    finally:
        await compiled.aclose()
    preloaded = PyodideRuntime(packages=["tabulate"], pool_size=0)
    try:
        result, _ = await run(preloaded, "import sys, tabulate\n['tabulate' in sys.modules, tabulate.tabulate([[1]])]")
        assert result.output == [True, "-\n1\n-"]
        assert "Packages installed: tabulate." in preloaded.prompt(TOOLS)
    finally:
        await preloaded.aclose()


# -- what is missing ----------------------------------------------------------------------


async def test_missing_deno_or_pyodide_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = PyodideRuntime(deno=str(tmp_path / "no-deno"), cache_dir=tmp_path)
    with pytest.raises(CapabilityError, match=r"needs Deno.*pyodide\]"):
        await runtime.execute("1", functions=TOOLS)
    await runtime.aclose()

    # A registry that serves a tarball which is not the pinned one: refused.
    async def tarball(request: web.Request) -> web.Response:
        return web.Response(body=b"not pyodide")

    app = web.Application()
    app.router.add_get(f"/pyodide/-/pyodide-{PYODIDE_VERSION}.tgz", tarball)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{port}")
        runtime = PyodideRuntime(cache_dir=tmp_path / "bad")
        with pytest.raises(CapabilityError, match="integrity"):
            await runtime.execute("1", functions=TOOLS)
        await runtime.aclose()
    finally:
        await runner.cleanup()
    monkeypatch.setenv("npm_config_registry", f"http://127.0.0.1:{port}")  # nothing listens now
    runtime = PyodideRuntime(cache_dir=tmp_path / "offline")
    with pytest.raises(CapabilityError, match="python -m codemode.runtimes.wasm fetch"):
        await runtime.execute("1", functions=TOOLS)
    await runtime.aclose()
    assert not (tmp_path / "offline" / "dist" / PYODIDE_VERSION).exists()
