"""The code's namespace: one stub per host tool (a global, or an attribute of a tool
namespace), each binding its arguments to the tool's real signature and calling the host."""

from __future__ import annotations

import builtins
import sys

from .artifacts import SAVE_ARTIFACT, _artifact_caller
from .channels import _flush_output
from .clock import _Clock
from .errors import CODE_FILE, TOOLS_FILE


class Runner:
    def __init__(self, channel, clock: _Clock) -> None:
        self.channel = channel
        self.clock = clock
        self.reported = None

    # calls

    def _message(self, name: str, args, kwargs, concurrent: bool, line):
        return {
            "type": "call",
            "call_id": self.channel.new_call_id(),
            "function_name": name,
            "args": list(args),
            "kwargs": dict(kwargs),
            "concurrent": concurrent,
            "line": line,
        }

    def call_sync(self, name: str, args, kwargs, line):
        msg = self._message(name, args, kwargs, False, line)
        _flush_output()
        self.clock.pause()
        try:
            answer = self.channel.call_sync(msg)
        finally:
            self.clock.resume()
        return _unwrap(answer)

    async def call_async(self, name: str, args, kwargs, line):
        import asyncio

        msg = self._message(name, args, kwargs, True, line)
        _flush_output()
        fut = self.channel.call_async(msg)
        loop = asyncio.get_running_loop()
        afut = loop.create_future()

        def ready(value) -> None:
            loop.call_soon_threadsafe(_set_if_pending, afut, value)

        fut.callbacks.append(ready)
        if fut.done:
            ready(fut.value)
        return _unwrap(await afut)

    def make_tool(self, spec):
        name = spec["name"]  # reported in calls; the code reaches it by its path
        checker = _checker(spec)
        call_sync, call_async = self.call_sync, self.call_async
        if name == SAVE_ARTIFACT:
            call_sync = _artifact_caller(call_sync)
        if spec.get("is_async"):

            def tool(*args, **kwargs):
                checker(*args, **kwargs)
                return call_async(name, args, kwargs, _caller_line())

        else:

            def tool(*args, **kwargs):
                checker(*args, **kwargs)
                return call_sync(name, args, kwargs, _caller_line())

        for attr in ("__name__", "__qualname__", "__doc__", "__annotations__"):
            try:
                setattr(tool, attr, getattr(checker, attr))
            except (AttributeError, TypeError):
                pass
        tool.__wrapped__ = checker  # inspect.signature(tool) shows the real signature
        tool.__codemode_tool__ = True
        return tool

    # the event loop: report "blocked" when it is about to sleep with calls outstanding

    def install_event_loop_policy(self) -> None:
        import asyncio
        import selectors

        runner = self

        class ReportingSelector(selectors.DefaultSelector):
            def select(self, timeout=None):
                if timeout is not None and timeout <= 0:
                    return super().select(timeout)
                waiting = runner.channel.outstanding()
                if not waiting:
                    return super().select(timeout)
                ready = super().select(0)
                if ready:
                    return ready
                if waiting != runner.reported:
                    runner.reported = waiting
                    _flush_output()
                    runner.channel.send({"type": "blocked", "waiting": list(waiting)})
                runner.clock.pause()
                try:
                    return super().select(timeout)
                finally:
                    runner.clock.resume()

        import warnings

        with warnings.catch_warnings():  # policies are deprecated from 3.14, still honoured
            warnings.simplefilter("ignore", DeprecationWarning)

            class Policy(asyncio.DefaultEventLoopPolicy):
                def new_event_loop(self):
                    return asyncio.SelectorEventLoop(ReportingSelector())

            asyncio.set_event_loop_policy(Policy())


class ToolNamespace:
    """A namespace of tools (``memory.read_graph()``): an object whose attributes are the
    tools' stubs. Its class is named like the stubs the prompt shows (``MemoryTools``)."""

    def __init__(self, name: str) -> None:
        self.__dict__["_namespace"] = name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self._namespace!r}>"

    def __setattr__(self, name, value) -> None:
        raise AttributeError(f"the {self._namespace} namespace is read-only")

    def __getattr__(self, name):
        raise AttributeError(f"{self._namespace} has no function {name!r}")


def _install_tools(namespace, runner, functions) -> None:
    """Bind each tool where the code finds it: a global, or an attribute of its namespace."""
    for spec in functions:
        tool = runner.make_tool(spec)
        path = spec.get("path")
        if not path:
            namespace[spec["name"]] = tool
            continue
        ns, _, attr = path.partition(".")
        obj = namespace.get(ns)
        if not isinstance(obj, ToolNamespace):
            title = "".join(p[:1].upper() + p[1:] for p in ns.split("_") if p) + "Tools"
            obj = type(title, (ToolNamespace,), {"__module__": "builtins"})(ns)
            namespace[ns] = obj
        obj.__dict__[attr] = tool


def _set_if_pending(fut, value) -> None:
    if not fut.done():
        fut.set_result(value)


def _checker(spec):
    """A function with the tool's real signature (from ``ToolSignature.stub()``) whose only
    job is to bind the arguments, raising Python's own TypeError on a bad call."""
    name = (spec.get("path") or spec["name"]).rpartition(".")[2]
    namespace = {}
    try:
        exec(compile("from __future__ import annotations\n" + spec["source"], TOOLS_FILE, "exec"), namespace)
        fn = namespace[name]
        if callable(fn):
            return fn
    except Exception:
        pass

    def fallback(*args, **kwargs):
        return None

    fallback.__name__ = fallback.__qualname__ = name
    return fallback


def _caller_line():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == CODE_FILE:
            return frame.f_lineno
        frame = frame.f_back
    return None


def _unwrap(answer):
    if answer.get("ok"):
        return answer.get("value")
    exc_type = str(answer.get("exc_type") or "RuntimeError")
    message = str(answer.get("message") or "")
    cls = getattr(builtins, exc_type, None)
    exc = None
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(message)
        except Exception:
            exc = None
    if exc is None:
        exc = RuntimeError(f"{exc_type}: {message}")
    raise exc
