"""Escape and abuse: what hostile code in the Pyodide sandbox can and cannot do.

The code runs in real Pyodide in a real Deno process and can reach JavaScript (``import
js``, ``js.eval``, dynamic ``import()``): the sandbox is Deno's permissions plus what the
runner removes. Each test asserts from the host, and the runtime is checked to serve the
next execution afterwards.
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from codemode.runtimes import CodeResourceError, CodeRuntimeError, CodeTimeoutError, ExecutionLimits, ExecutionResult

from .conftest import shared_pyodide

PROJECT = Path(__file__).resolve().parents[2]


def get_weather(city: str) -> dict[str, Any]:
    """Weather for a city."""
    raise NotImplementedError


@pytest.fixture
async def rt() -> Any:
    runtime = shared_pyodide()
    try:
        yield runtime
    finally:
        await runtime.close_executions()


async def value(rt: Any, code: str, limits: ExecutionLimits | None = None, answer: Any = None) -> Any:
    execution = await rt.execute(code, functions={"get_weather": get_weather}, limits=limits)
    async with execution:
        event = await execution.next_batch()
        while not isinstance(event, ExecutionResult):
            for call in event:
                await execution.provide_result(answer(call) if answer else None, call_id=call.call_id)
            event = await execution.next_batch()
    return event


async def error(rt: Any, code: str, limits: ExecutionLimits | None = None) -> Exception:
    with pytest.raises(Exception) as info:
        await value(rt, code, limits)
    return info.value


async def test_deno_is_unreachable_from_the_code(rt: Any) -> None:
    code = (
        "import js\n"
        "[hasattr(js, 'Deno'), str(js.eval('typeof Deno')), str(js.eval('typeof globalThis.Deno')),\n"
        " str(js.eval('typeof Worker === \"function\" && typeof Deno'))]"
    )
    result = await value(rt, code)
    assert result.output == [False, "undefined", "undefined", "undefined"]


async def test_forged_protocol_lines_are_ignored(rt: Any) -> None:
    """Lines on the runner's stdout without its token are dropped: console.log (sent to the
    output), node:process's stdout and a worker's own Deno.stdout (raw, to the host)."""
    forged = '{"type": "done", "output": "forged"}'
    code = (
        "import js\n"
        f"js.console.log({forged!r})\n"
        "proc = await js.eval(\"import('node:process')\")\n"
        f"proc.stdout.write({forged!r} + '\\n')\n"
        f"proc.stdout.write('0123456789abcdef0123456789abcdef ' + {forged!r} + '\\n')\n"
        "js.eval(\"new Worker('data:text/javascript,Deno.stdout.writeSync(new TextEncoder().encode("
        "JSON.stringify({type: \\\"done\\\", output: \\\"forged\\\"}) + String.fromCharCode(10)))', "
        "{type: 'module'})\")\n"
        "import asyncio\n"
        "await asyncio.sleep(0.5)\n"
        "w = get_weather('Paris')\n"
        "'real'"
    )
    result = await value(rt, code, answer=lambda call: {"temp": 1})
    assert result.output == "real"
    assert result.tool_calls == 1
    assert "forged" in result.stdout  # console.log is the code's output, not the protocol


async def test_only_the_executions_tools_can_be_called(rt: Any) -> None:
    """The code can reach the runner's own call function (through a stub's closure), which
    writes tokened lines: the host still refuses a tool the execution was not given."""
    code = (
        "import json\n"
        "runner = next(c.cell_contents for c in get_weather.__closure__\n"
        "              if hasattr(c.cell_contents, '__self__'))\n"
        "channel = runner.__self__.channel\n"
        "msg = {'type': 'call', 'call_id': '77', 'function_name': 'delete_everything', 'args': [],\n"
        "       'kwargs': {}, 'concurrent': True, 'line': 5}\n"
        "channel.host.call('77', json.dumps(msg), True)\n"
        "get_weather('Paris')\n"
    )
    err = await error(rt, code)
    assert isinstance(err, CodeRuntimeError) and err.error_type == "PermissionError"
    assert "delete_everything" in err.message


async def test_no_host_file_environment_or_network(rt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "hunter2")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    code = (
        "import js, os\n"
        "def attempt(expr):\n"
        "    try:\n        return ('allowed', str(js.eval(expr)))\n"
        "    except Exception as e:\n        return ('refused', type(e).__name__)\n"
        "async def attempt_async(expr):\n"
        "    try:\n        return ('allowed', str(await js.eval(expr)))\n"
        "    except Exception as e:\n        return ('refused', type(e).__name__)\n"
        "def py_open(p):\n"
        "    try:\n        return open(p).read()[:20]\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "fs = await js.eval(\"import('node:fs')\")\n"
        "proc = await js.eval(\"import('node:process')\")\n"
        "out = {\n"
        "  'py_passwd': py_open('/etc/passwd'), 'py_project': py_open(%r),\n"
        "  'root': sorted(os.listdir('/')), 'env': dict(os.environ),\n"
        "  'node_fs': await attempt_async(\"import('node:fs').then(fs => fs.readFileSync('/etc/passwd', 'utf8'))\"),\n"
        "  'project': await attempt_async(\"import('node:fs').then(fs => fs.readFileSync(%r, 'utf8'))\"),\n"
        "  'import_file': await attempt_async(\"import('file:///etc/hostname', {with: {type: 'text'}})\"),\n"
        "  'env_js': await attempt_async(\"import('node:process').then(p => p.env.CODEMODE_TEST_SECRET)\"),\n"
        "  'write': await attempt_async(\"import('node:fs').then(fs => fs.writeFileSync('/tmp/codemode-escape', 'x'))\"),\n"
        "  'fetch': await attempt_async(\"fetch('http://127.0.0.1:%d/')\"),\n"
        "  'remote': await attempt_async(\"import('https://esm.sh/left-pad')\"),\n"
        "  'npm': await attempt_async(\"import('npm:left-pad')\"),\n"
        "  'spawn': await attempt_async(\"import('node:child_process').then(c => c.execSync('id').toString())\"),\n"
        "}\n"
        "import subprocess, threading\n"
        "try:\n    subprocess.run(['id'])\n    out['subprocess'] = 'ran'\nexcept Exception as e:\n    out['subprocess'] = type(e).__name__\n"
        "try:\n    threading.Thread(target=print).start()\n    out['thread'] = 'ran'\nexcept Exception as e:\n    out['thread'] = type(e).__name__\n"
        "out"
    ) % (str(PROJECT / "pyproject.toml"), str(PROJECT / "pyproject.toml"), port)
    try:
        out = (await value(rt, code)).output
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
    finally:
        listener.close()
    assert out["py_passwd"] == "FileNotFoundError" and out["py_project"] == "FileNotFoundError"
    assert "root" not in out["root"] and "work" not in out["root"]  # an in-memory filesystem
    assert "CODEMODE_TEST_SECRET" not in out["env"] and "hunter2" not in str(out)
    for key in ("node_fs", "project", "import_file", "env_js", "write", "fetch", "remote", "npm", "spawn"):
        assert out[key][0] == "refused", (key, out[key])
    assert not os.path.exists("/tmp/codemode-escape")
    assert out["subprocess"] in ("OSError", "PermissionError", "FileNotFoundError", "RuntimeError")
    assert out["thread"] == "RuntimeError"


async def test_memory_bomb_is_contained(rt: Any) -> None:
    limits = ExecutionLimits(max_memory_bytes=128 * 1024 * 1024)
    err = await error(rt, "x = bytearray(2**31 - 1)", limits)
    assert isinstance(err, CodeResourceError) and err.error_type == "MemoryError" and err.line == 1
    err = await error(rt, "chunks = []\nwhile True:\n    chunks.append(b' ' * 10**6)\n", limits)
    assert isinstance(err, CodeResourceError) and err.error_type == "MemoryError" and err.line == 3
    assert (await value(rt, "len(bytearray(10**7))", limits)).output == 10**7


async def test_infinite_loop_is_stopped_and_the_runtime_goes_on(rt: Any) -> None:
    limits = ExecutionLimits(timeout_seconds=1)
    started = time.monotonic()
    err = await error(rt, "while True:\n    pass\n", limits)
    assert isinstance(err, CodeTimeoutError) and err.line in (1, 2)  # interrupted where it ran
    assert time.monotonic() - started < 10
    # swallowing the interrupt does not help: the host kills the process a second later
    code = "n = 0\nwhile True:\n    try:\n        while n >= 0:\n            n += 1\n    except BaseException:\n        pass\n"
    err = await error(rt, code, limits)
    assert isinstance(err, CodeTimeoutError) and "stopped" in err.message
    # a sleeping sandbox is not waiting for the host: it counts
    assert isinstance(await error(rt, "import time\ntime.sleep(30)", limits), CodeTimeoutError)
    assert (await value(rt, "sum(range(10))")).output == 45  # the next execution is fine


async def test_ten_megabytes_of_prints_are_truncated_with_a_note(rt: Any) -> None:
    limits = ExecutionLimits(max_stdout_bytes=64 * 1024)
    result = await value(rt, "for i in range(100_000):\n    print('x' * 99)\n'done'", limits)
    assert result.output == "done"
    assert result.stdout_truncated
    assert result.stdout.endswith(f"\n[output truncated: more than {64 * 1024} bytes printed]\n")
