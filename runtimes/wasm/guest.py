"""The Python side of the pyodide runtime, inside Pyodide (``runner.mjs`` imports it as
``codemode_guest``; it is baked into the memory snapshot).

It reuses the CPython runner (the package ``codemode_runner``, ``runtimes/runner/sandbox/``,
unpacked beside it) for everything that is not about threads or file descriptors:
compiling the code so its last expression is the output, the tool stubs with each tool's
real signature and the line of each call, the seeded ``random`` / ``uuid`` and the virtual
clock, in-band errors with the user's line and a traceback without our frames. Only the
channel differs: a call is a JS promise that ``runner.mjs`` resolves when the host's answer
arrives; a sync tool waits for it with ``pyodide.ffi.run_sync`` (JSPI suspends the
WebAssembly stack while the JS event loop runs on), an ``async def`` tool awaits it.
"""

from __future__ import annotations

import builtins
import importlib
import sys

from codemode_runner import channels, errors, execute, tools, wire
from codemode_runner.clock import CodeTimeout
from codemode_runner.determinism import _install_determinism

#: Imported before the snapshot is taken, so an execution does not pay for them.
STDLIB_PRELOAD = (
    "asyncio", "json", "re", "datetime", "random", "uuid", "traceback", "linecache", "inspect",
    "typing", "dataclasses", "collections", "functools", "itertools", "math", "statistics",
    "decimal", "fractions", "string", "textwrap", "pyodide.ffi",
)  # fmt: skip


class _NoClock:
    """The runner's compute clock is an interval timer; here the host's own clock kills the
    process at the limit, so the runner's pause/resume have nothing to do."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...


class PromiseChannel(channels._Channel):
    """Sequential call ids and answer dispatch from the runner; ``host`` (a JS object from
    ``runner.mjs``) sends a message, a sync call whose answer a promise resolves, or an
    async call whose answer comes back, with every other answer that arrived meanwhile,
    through ``deliver_lines`` (one JS->Python call per batch of answers, not a promise and
    its chain of Python futures per call)."""

    def __init__(self, host) -> None:
        from pyodide.ffi import create_proxy

        super().__init__()
        self.host = host
        self.receiver = create_proxy(self.deliver_lines)
        host.receive(self.receiver)

    def deliver_lines(self, lines: str) -> None:
        """Answers to async calls, one JSON per line."""
        for line in lines.split("\n"):
            self.deliver(wire._loads(line))

    def close(self) -> None:
        self.receiver.destroy()

    def send(self, msg) -> None:
        self.host.send(wire._dumps_str(msg))

    def call_sync(self, msg):
        from pyodide.ffi import run_sync

        return wire._loads(run_sync(self.host.call(msg["call_id"], wire._dumps_str(msg))))

    def call_async(self, msg):
        future = self.register(msg["call_id"])
        self.host.call_async(msg["call_id"], wire._dumps_str(msg))
        return future


class GuestRunner(tools.Runner):
    """The runner's tools, with an async call's answer set straight on its asyncio future:
    answers arrive on the loop's own (only) thread, so the CPython runner's hop through
    ``call_soon_threadsafe`` is a callback for nothing, and a plain ``asyncio.Future``
    skips the WebLoop's count of futures in progress (two more callbacks per call). The
    future is always awaited: the count's report of a never-retrieved error has nothing
    to report."""

    async def call_async(self, name: str, args, kwargs, line):
        import asyncio

        msg = self._message(name, args, kwargs, True, line)
        channels._flush_output()
        fut = self.channel.call_async(msg)
        afut = asyncio.Future()
        fut.callbacks.append(lambda value: tools._set_if_pending(afut, value))
        if fut.done:
            tools._set_if_pending(afut, fut.value)
        return tools._unwrap(await afut)


def batch_ready_callbacks() -> None:
    """Run the event loop's ready callbacks in batches, as CPython's loop does.

    Pyodide's ``WebLoop.call_soon`` hands each callback to JavaScript as a task of its own
    (a ``setImmediate`` through a JSPI-capable wrapper: a stack switch and a JS<->Python
    round trip per callback). ``asyncio.gather`` over N tool calls makes about five such
    callbacks per call (the task's steps, the answer's hand-off, gather's bookkeeping), and
    those hops, not the code or the channel, were most of a gathered call's cost. Here the
    ready callbacks queue in Python and one JavaScript task runs every callback queued
    before it started, in order; one queued meanwhile runs in the next such task. A
    callback that suspends (a sync tool called from a task) holds back the rest of its
    batch, which another batch does not wait for. Timers (a delay > 0) are Pyodide's own."""
    import collections

    from pyodide.ffi import create_once_callable
    from pyodide.webloop import WebLoop
    from pyodide_js._api import scheduleCallback

    ready: collections.deque = collections.deque()
    scheduled = [False]
    call_later = WebLoop.call_later

    def schedule() -> None:
        scheduled[0] = True
        scheduleCallback(create_once_callable(drain, _may_syncify=True), 0)

    def drain() -> None:
        scheduled[0] = False
        for _ in range(len(ready)):
            loop, handle = ready.popleft()
            if handle.cancelled():
                continue
            loop._install_running_loop()
            loop._install_asyncgen_hooks()
            try:
                handle._run()
            except SystemExit as exc:
                if not loop._system_exit_handler:
                    _reschedule(ready, scheduled, schedule)
                    raise
                loop._system_exit_handler(exc.code)
            except KeyboardInterrupt:
                if not loop._keyboard_interrupt_handler:
                    _reschedule(ready, scheduled, schedule)
                    raise
                loop._keyboard_interrupt_handler()
            except BaseException:
                _reschedule(ready, scheduled, schedule)
                raise

    def batched_call_later(self, delay, callback, *args, context=None):
        if delay != 0:
            return call_later(self, delay, callback, *args, context=context)
        handle = asyncio.Handle(callback, args, self, context=context)
        ready.append((self, handle))
        if not scheduled[0]:
            schedule()
        return handle

    import asyncio

    WebLoop.call_later = batched_call_later


def _reschedule(ready, scheduled, schedule) -> None:
    """A callback raised out of its batch: the rest still run, in a batch of their own."""
    if ready and not scheduled[0]:
        schedule()


def preload(wheels_json: str, names_json: str) -> None:
    """Before the snapshot is taken: unpack the preloaded (pure-Python) wheels into
    site-packages and import them, with the standard library modules above."""
    import site
    import zipfile

    target = site.getsitepackages()[0]
    for path in wire._loads(wheels_json):
        with zipfile.ZipFile(path) as wheel:
            wheel.extractall(target)
    importlib.invalidate_caches()
    for name in (*STDLIB_PRELOAD, *wire._loads(names_json)):
        importlib.import_module(name)
    batch_ready_callbacks()


def warm(names_json: str) -> None:
    """Import the execution's packages while the process waits for its code. A package
    that fails to import fails again, with its real error, where the code imports it."""
    for name in wire._loads(names_json):
        try:
            importlib.import_module(name)
        except Exception:
            sys.modules.pop(name, None)


def prime(host) -> None:
    """Run what an execution runs (compile, tool stubs, sync calls through JSPI, JSON) once
    while the process waits for its code: V8 compiles code as it first runs, and the first
    calls of an execution would otherwise pay for it. ``host`` answers every call at once."""
    from pyodide.ffi import run_sync

    saved = execute._run_coroutine
    execute._run_coroutine = run_sync
    try:
        channel = PromiseChannel(host)
        runner = GuestRunner(channel, _NoClock())
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        for name, is_async in (("ping", False), ("aping", True)):
            spec = {"name": name, "is_async": is_async, "source": f"def {name}(i: int) -> int: ..."}
            namespace[name] = runner.make_tool(spec)
        code = "import asyncio\nt = sum(ping(i) for i in range(12))\nt += sum(await asyncio.gather(*[aping(i) for i in range(4)]))\nt"
        execute._run(execute._compile(code), namespace, _NoClock(), True)
    finally:
        execute._run_coroutine = saved
        channel.close()


async def run(boot_json: str, host) -> str:
    """Run the bootstrap's code; the final message (``done`` or ``error``) as JSON."""
    channel = PromiseChannel(host)
    msg = _run(wire._loads(boot_json), channel)
    try:
        return wire._dumps_str(msg)
    except (TypeError, ValueError):  # an output JSON cannot hold (e.g. a circular list)
        return wire._dumps_str({"type": "done", "output": repr(msg.get("output"))})


def _timeout_on_interrupt(limit: float) -> None:
    """``runner.mjs`` interrupts Python (SIGINT, through Pyodide's interrupt buffer) when the
    code's compute time reaches the limit: raise the runner's own timeout there, so the
    error carries the line the code was on (a ``BaseException``: ``except Exception`` in the
    code does not swallow it)."""
    import signal

    def expired(signum, frame):
        raise CodeTimeout(f"the code used more than {limit:g} s of compute time")

    signal.signal(signal.SIGINT, expired)


def _run(boot, channel: PromiseChannel):
    code = boot["code"]
    errors._SOURCE[:] = [code]
    try:
        code_obj = execute._compile(code)
    except SyntaxError as exc:
        return errors._syntax_error(exc)
    except ValueError as exc:  # e.g. a NUL byte in the source
        return {"type": "error", "kind": "syntax", "error_type": "SyntaxError", "message": str(exc)}
    clock = _NoClock()
    runner = GuestRunner(channel, clock)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update(boot.get("inputs") or {})
    tools._install_tools(namespace, runner, boot.get("functions", []))  # globals, or namespaces (mcp)
    if boot.get("determinism"):
        _install_determinism(boot["determinism"], namespace)
    execute._run_prelude(boot.get("prelude"), namespace)
    from pyodide.ffi import run_sync

    execute._run_coroutine = run_sync
    _timeout_on_interrupt(float(boot.get("limits", {}).get("timeout_seconds", 30.0)))
    execute._RESERVE[:] = [bytearray(4 << 20)]
    channel.send({"type": "ready"})
    is_coroutine = bool(code_obj.co_flags & 0x80)  # inspect.CO_COROUTINE
    return execute._run(code_obj, namespace, clock, is_coroutine)
