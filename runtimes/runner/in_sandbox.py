"""The sandbox side of the real-CPython runtime: one file, standard library only.

The host copies (or bind-mounts, or uploads) this file into the sandbox and runs it with
``python -I -S runner.py [--drop-to UID:GID]`` (``-s -S -P`` with ``PYTHONHASHSEED`` set
when the execution has a seed; plain ``python3 runner.py`` in an E2B sandbox, whose
packages the code may use). It reads one JSON line (the bootstrap) on
stdin, defines one stub per host tool, runs the user's code and talks to the host over a
callback channel:

* ``stdio``: JSON lines. The runner keeps private duplicates of fds 0 and 1 for the protocol
  and points fd 0 at /dev/null and fd 1 at fd 2 before any user code runs, so nothing the
  code prints (nor any child process it starts) can reach the protocol channel.
* ``http``: POST /message and POST /poll with a bearer token, over a unix socket or TCP,
  with ``urllib``.

Either way, everything the code prints goes to fd 2, which the host drains with a byte cap.

Messages to the host: ``ready``, ``call``, ``blocked``, ``done``, ``error`` (see
``runtimes/transports/protocol.py``, which validates them on the host). Answers from the
host: ``{"type": "answer", "call_id", "ok", "value" | "exc_type" + "message"}``.

Two additions for hosts that reach the runner through a provider's API (E2B), stdio only:

* **output marks** (bootstrap ``output_marks``): before each message the runner flushes
  the code's output and writes ``\x1ecm:N\x1f\n`` on it, and the message carries
  ``"mark": N``, so a host that receives output and protocol on two unordered streams
  can wait for the output that preceded a message. The newline lets a provider that
  delivers output a line at a time (Blaxel's log stream) deliver the mark at once.
* **sync**: ``{"type": "sync", "nonce"}`` from the host, answered at once from the reader
  thread with ``{"type": "synced", "nonce", "calls", "waiting"}``: call ids issued so far
  and those without an answer. A host re-attaching after a gap (output emitted while
  nobody listened is lost) trusts the runner only if that matches its checkpoint. A sync
  never changes the runner's state, so it is safe to repeat.

Determinism (bootstrap ``determinism``, ``codemode.runtimes.types.Determinism``): ``random``,
``uuid.uuid4`` and ``numpy.random`` are seeded per execution when first imported, and with an ``epoch`` the
wall clock (``time.time``, ``datetime.now`` ...) is a virtual one, so that a journal
replay of the same code makes the same calls.

Sync tools block the calling thread until the host answers. ``async def`` tools return a
coroutine: each call is sent when its task first runs, so ``asyncio.gather(f(1), f(2))``
shows both calls to the host before either needs its value. The event loop's selector tells
the host ``blocked`` when the loop is about to sleep with calls outstanding. Call ids are
sequential strings ("1", "2", ...), the same on every run of the same code.

Compute time: an ``ITIMER_REAL`` alarm paused while the code waits for the host raises a
timeout at the limit with the line the code was on; the host's own watchdog and
``RLIMIT_CPU`` back it up if the code ignores it.
"""

from __future__ import annotations

import builtins
import os
import sys

# Start-up time matters (one process per execution): on the hot path the runner uses only
# C modules, because ``signal``, ``json``, ``ast`` and ``threading`` pull in ``enum``,
# ``re`` and ``functools``, which together cost more than the interpreter's own start.
try:
    import _signal as signal
    import _thread
except ImportError:  # pragma: no cover - not CPython
    import _thread  # type: ignore[no-redef]
    import signal  # type: ignore[no-redef]

#: The file name in this module's code objects (its frames are hidden from tracebacks);
#: the host may run a precompiled copy whose code names another file than ``__file__``.
RUNNER_FILE = sys._getframe().f_code.co_filename
CODE_FILE = "<code>"
TOOLS_FILE = "<tools>"
OUTPUT_NAME = "__codemode_output__"
#: What a warm interpreter writes once it is ready for its bootstrap (``runtimes/warm_pool.py``).
WARM_LINE = b'{"type": "warm"}\n'
_THREAD_STACK = 512 * 1024


_CLOCK_SIGNALS = {signal.SIGALRM, signal.SIGXCPU}
_SIG_BLOCK = getattr(signal, "SIG_BLOCK", 0)
_SIG_SETMASK = getattr(signal, "SIG_SETMASK", 2)


class CodeTimeout(BaseException):
    """Raised in the main thread at the compute-time limit (BaseException: ``except
    Exception`` in the code does not swallow it)."""


# -- JSON -------------------------------------------------------------------------------


def _jsonable(obj):
    """``json.dumps`` fallback: values a tool call or the output may hold that JSON lacks."""
    if isinstance(obj, (set, frozenset)):
        try:
            return sorted(obj)
        except TypeError:
            return list(obj)
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).decode("utf-8", "replace")
    if hasattr(obj, "isoformat"):
        return obj.isoformat()
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    if hasattr(obj, "__dataclass_fields__"):
        import dataclasses

        return dataclasses.asdict(obj)
    if hasattr(obj, "tolist"):
        return obj.tolist()
    return repr(obj)


def _make_json():
    """(loads, dumps) on the ``_json`` C accelerators, checked on a sample; the ``json``
    package when they are missing or differ."""
    try:
        import _json

        class Context:
            strict = True
            object_hook = None
            object_pairs_hook = None
            parse_float = float
            parse_int = int
            parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__

        scan = _json.make_scanner(Context())
        make_encoder = _json.make_encoder
        ascii_str = _json.encode_basestring_ascii

        def loads(data):
            text = (data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data).strip()
            try:
                obj, end = scan(text, 0)
            except Exception:
                raise ValueError("invalid JSON") from None
            if end != len(text):
                raise ValueError("extra data after JSON")
            return obj

        def dumps(obj) -> str:
            encode = make_encoder({}, _jsonable, ascii_str, None, ":", ",", False, False, True)
            return "".join(encode(obj, 0))

        sample = {"a": [1, 2.5, "\u00e9\n", None, True, False], "b": {"c": -3}}
        if loads(dumps(sample)) != sample or dumps({1: {2}}) != '{"1":[2]}':
            raise ValueError("unexpected _json behaviour")
        return loads, dumps
    except Exception:  # pragma: no cover - other interpreters
        import json

        return json.loads, lambda obj: json.dumps(obj, default=_jsonable, separators=(",", ":"))


_loads, _dumps_str = _make_json()


def _dumps(msg) -> bytes:
    return _dumps_str(msg).encode()


# -- compute clock ----------------------------------------------------------------------


class _Clock:
    """Compute time left, on ITIMER_REAL; paused while any thread waits for the host."""

    def __init__(self, seconds: float) -> None:
        self.limit = seconds
        self.remaining = seconds
        self.waiting = 0
        self.armed = False
        self.lock = _thread.allocate_lock()

    def start(self) -> None:
        signal.signal(signal.SIGALRM, self._expired)
        with self.lock:
            self.armed = True
            if self.waiting == 0:
                signal.setitimer(signal.ITIMER_REAL, max(self.remaining, 1e-6))

    def _expired(self, signum, frame) -> None:
        raise CodeTimeout(f"the code used more than {self.limit:g} s of compute time")

    def pause(self) -> None:
        with self.lock:
            self.waiting += 1
            if self.waiting == 1 and self.armed:
                left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
                self.remaining = left if left > 0 else 0.0

    def resume(self) -> None:
        with self.lock:
            self.waiting -= 1
            if self.waiting == 0 and self.armed:
                signal.setitimer(signal.ITIMER_REAL, max(self.remaining, 1e-6))

    def stop(self) -> None:
        with self.lock:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)


# -- channels ---------------------------------------------------------------------------


class _Future:
    """A one-shot slot for an answer: a lock held until the answer arrives."""

    __slots__ = ("lock", "value", "done", "callbacks")

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.lock.acquire()
        self.value = None
        self.done = False
        self.callbacks = []

    def set(self, value) -> None:
        if self.done:
            return
        self.value = value
        self.done = True
        self.lock.release()
        for cb in self.callbacks:
            cb(value)

    def wait(self):
        with self.lock:
            return self.value


class _Channel:
    """Common part: sequential call ids, outstanding async calls, answer dispatch."""

    def __init__(self) -> None:
        self.lock = _thread.allocate_lock()
        self.next_id = 0
        self.waiting = {}  # call_id -> _Future, answers not yet received
        #: Session mode: cells begun, and the slot the next ``cell`` message goes to.
        self.cells = 0
        self.cell_slot = None

    def expect_cell(self) -> _Future:
        """The slot for the next cell (made before telling the host we are ready for it)."""
        with self.lock:
            self.cell_slot = _Future()
            return self.cell_slot

    def begin_cell(self) -> None:
        """Each cell numbers its calls from 1, like a standalone execution."""
        with self.lock:
            self.cells += 1
            self.next_id = 0
            self.waiting.clear()

    def deliver_cell(self, msg) -> None:
        with self.lock:
            slot, self.cell_slot = self.cell_slot, None
        if slot is not None:
            slot.set(msg)

    def new_call_id(self) -> str:
        with self.lock:
            self.next_id += 1
            return str(self.next_id)

    def deliver(self, answer) -> None:
        with self.lock:
            fut = self.waiting.pop(str(answer.get("call_id")), None)
        if fut is not None:
            fut.set(answer)

    def outstanding(self) -> tuple:
        with self.lock:
            return tuple(self.waiting)

    def register(self, call_id: str) -> _Future:
        fut = _Future()
        with self.lock:
            self.waiting[call_id] = fut
        return fut


class StdioChannel(_Channel):
    """JSON lines on private duplicates of the original stdin/stdout.

    ``marks``: before each message, flush the code's output and write an output mark
    (``\x1ecm:N\x1f\n``) on it; the message carries ``"mark": N``. A host that receives the
    output and the protocol as two streams with no order between them (E2B's envd reads
    stdout and stderr separately) waits for mark N before handling message N, so
    everything printed before a call is in the output when the call arrives.

    A ``sync`` request (``{"type": "sync", "nonce"}``) is answered from the reader thread
    with where the runner is: ``{"type": "synced", "nonce", "calls", "waiting", "cells"}``
    (calls made so far, calls still waiting for an answer, cells begun in session mode). A host re-attaching to a runner it
    did not watch (nothing emitted meanwhile reached it) checks that it is where the
    checkpoint says before trusting it.
    """

    def __init__(self, reader, write_fd: int, marks: bool = False) -> None:
        super().__init__()
        self.reader = reader
        self.write_fd = write_fd
        self.write_lock = _thread.allocate_lock()
        self.marks = marks
        self.mark = 0
        _start_thread(self._read_loop)

    def send(self, msg) -> None:
        data = _dumps(msg) + b"\n"
        # A timeout signal between two partial writes would leave half a line on the
        # channel: hold SIGALRM/SIGXCPU until the whole message is written.
        old = signal.pthread_sigmask(_SIG_BLOCK, _CLOCK_SIGNALS)
        try:
            with self.write_lock:
                if self.marks and msg.get("type") != "synced":
                    data = self._marked(msg, data)
                view = memoryview(data)
                while view:
                    n = os.write(self.write_fd, view)
                    view = view[n:]
        finally:
            signal.pthread_sigmask(_SIG_SETMASK, old)

    def _marked(self, msg, data: bytes) -> bytes:
        _flush_output()
        self.mark += 1
        try:
            os.write(2, b"\x1ecm:%d\x1f\n" % self.mark)  # under PIPE_BUF: never split
        except OSError:  # the code closed its output: nothing to wait for
            return data
        return _dumps(dict(msg, mark=self.mark)) + b"\n"

    def _read_loop(self) -> None:
        for line in self.reader:
            try:
                msg = _loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            kind = msg.get("type")
            if kind == "answer":
                self.deliver(msg)
            elif kind == "cell":
                self.deliver_cell(msg)
            elif kind == "sync":
                with self.lock:
                    calls, waiting, cells = self.next_id, sorted(self.waiting, key=int), self.cells
                self.send({"type": "synced", "nonce": msg.get("nonce"), "calls": calls, "waiting": waiting, "cells": cells})
        os._exit(70)  # the host went away: nothing left to do

    def call_sync(self, msg):
        fut = self.register(msg["call_id"])
        self.send(msg)
        return fut.wait()

    def call_async(self, msg) -> _Future:
        fut = self.register(msg["call_id"])
        self.send(msg)
        return fut


class HttpChannel(_Channel):
    """POST /message and long-poll POST /poll, with ``urllib``; over a unix socket when
    ``unix_socket`` is set (the sandbox has no network), else to ``url``."""

    def __init__(self, url: str, token: str, unix_socket: str | None = None) -> None:
        super().__init__()
        import urllib.request

        self.url = url.rstrip("/")
        self.headers = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
        handlers = [urllib.request.ProxyHandler({})]
        if unix_socket:
            handlers.append(_unix_handler(unix_socket))
        self.opener = urllib.request.build_opener(*handlers)
        self.request = urllib.request.Request
        self.wake = _thread.allocate_lock()  # released when the poller has work
        self.wake.acquire()
        self.poller = False

    def _post(self, path: str, msg):
        req = self.request(self.url + path, data=_dumps(msg), headers=self.headers, method="POST")
        with self.opener.open(req, timeout=None) as resp:
            return _loads(resp.read())

    def send(self, msg) -> None:
        self._post("/message", msg)

    def call_sync(self, msg):
        return self._post("/message", msg)["answer"]

    def call_async(self, msg) -> _Future:
        fut = self.register(msg["call_id"])
        self._post("/message", msg)
        with self.lock:
            start, self.poller = not self.poller, True
        if start:
            _start_thread(self._poll_loop)
        try:
            self.wake.release()
        except RuntimeError:  # already released: the poller is awake
            pass
        return fut

    def _poll_loop(self) -> None:
        while True:
            while not self.outstanding():
                self.wake.acquire()
            try:
                answers = self._post("/poll", {})["answers"]
            except OSError:
                os._exit(70)  # the host went away
            for answer in answers:
                self.deliver(answer)


def _start_thread(target) -> None:
    """A thread with a small stack (RLIMIT_DATA counts thread stacks), without changing the
    stack size of the code's own threads."""
    old = _thread.stack_size(_THREAD_STACK)
    try:
        _thread.start_new_thread(target, ())
    finally:
        _thread.stack_size(old)


def _flush_output() -> None:
    try:
        sys.stdout.flush()
    except Exception:
        pass


def _unix_handler(path: str):
    """A urllib handler that sends ``http://`` requests over the unix socket ``path``."""
    import http.client
    import socket
    import urllib.request

    class UnixHTTPConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            if self.timeout is not None and self.timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:
                sock.settimeout(self.timeout)
            sock.connect(path)
            self.sock = sock

    class UnixHandler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(UnixHTTPConnection, req)

    return UnixHandler()


# -- tool stubs -------------------------------------------------------------------------


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


# -- artifacts (``codemode.runtimes.artifacts``) -------------------------------------------

SAVE_ARTIFACT = "save_artifact"
OUTPUTS_GLOBAL = "OUTPUTS_DIR"
OUTPUTS_ENV = "CODEMODE_OUTPUTS_DIR"
OUTPUTS_DIR = "/tmp/outputs"
#: A file bigger than this is sent as its size and hash only (the host refuses it): its
#: base64 would not fit the wire's largest message.
_WIRE_FILE_BYTES = 40 * 1024 * 1024


def _artifact_caller(call_sync):
    """``save_artifact``'s bytes cross the JSON wire as base64."""

    def call(name, args, kwargs, line):
        args, kwargs = list(args), dict(kwargs)
        if len(args) > 1:
            args[1] = _wire_data(args[1])
        elif "data" in kwargs:
            kwargs["data"] = _wire_data(kwargs["data"])
        return call_sync(name, args, kwargs, line)

    return call


def _wire_data(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        import binascii

        data = bytes(data)
        if len(data) > _WIRE_FILE_BYTES:
            import hashlib

            return {"omitted": True, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        return {"b64": binascii.b2a_base64(data, newline=False).decode("ascii")}
    return data


def _prepare_outputs(namespace):
    """Make the outputs directory and tell the code where it is; the ``save_artifact`` stub
    that hands its files back when the code ends, or None (no such stub, or no filesystem).
    Files left by an earlier cell of a session were handed back by that cell already."""
    save = namespace.get(SAVE_ARTIFACT)
    if not getattr(save, "__codemode_tool__", False):
        return None
    # /tmp/outputs in every sandbox (its private /tmp); a run without one (the python runtime's
    # isolation="none") has a TMPDIR of its own, so its outputs are not another run's.
    tmp = os.environ.get("TMPDIR") or "/tmp"
    path = os.environ.get(OUTPUTS_ENV) or (OUTPUTS_DIR if tmp.rstrip("/") == "/tmp" else os.path.join(tmp, "outputs"))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    os.environ[OUTPUTS_ENV] = path
    namespace[OUTPUTS_GLOBAL] = path
    return save, path


def _save_outputs(save) -> None:
    """Hand each file under the outputs directory to ``save_artifact`` (name order), then
    remove it. A refusal (over a cap) is the code's error, as it would be for its own call."""
    fn, root = save
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    for name, path in sorted(found):
        with open(path, "rb") as f:
            data = f.read()
        fn(name, data)
        os.unlink(path)


# -- errors -----------------------------------------------------------------------------


def _user_traceback(exc: BaseException) -> tuple:
    """(text, line): the traceback without runner or stub frames, and the innermost line of
    the user's code."""
    import traceback

    def trim(te) -> None:
        frames = list(te.stack)
        start = next((i for i, f in enumerate(frames) if f.filename == CODE_FILE), len(frames))
        kept = [f for f in frames[start:] if f.filename not in (RUNNER_FILE, TOOLS_FILE)]
        te.stack = traceback.StackSummary.from_list(kept)
        for nested in (te.__cause__, te.__context__):
            if nested is not None:
                trim(nested)

    if _SOURCE:
        import linecache  # only now: it imports tokenize and re, costly at start-up

        linecache.cache[CODE_FILE] = (len(_SOURCE[0]), None, _SOURCE[0].splitlines(True), CODE_FILE)
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    except TypeError:  # Python < 3.10
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    trim(te)
    line = None
    for frame in te.stack:
        if frame.filename == CODE_FILE:
            line = frame.lineno
    return "".join(te.format()), line


def _code_line(exc: BaseException):
    """The innermost line of the user's code in ``exc``'s traceback (allocation-free)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == CODE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _error_message(kind: str, exc: BaseException, error_type: str | None = None, message: str | None = None):
    line = _code_line(exc)
    try:
        text, line = _user_traceback(exc)
    except BaseException:  # formatting must never hide the error itself
        text = None
    return {
        "type": "error",
        "kind": kind,
        "error_type": error_type or type(exc).__name__,
        "message": str(exc) if message is None else message,
        "line": line,
        "traceback": text,
    }


def _syntax_error(exc: SyntaxError):
    import traceback

    return {
        "type": "error",
        "kind": "syntax",
        "error_type": type(exc).__name__,
        "message": str(exc.msg),
        "line": exc.lineno,
        "traceback": "".join(traceback.format_exception_only(type(exc), exc)),
    }


# -- replay-safe randomness and clock ------------------------------------------------------


class _VirtualClock:
    """The wall clock the code reads: ``epoch`` plus one microsecond per read plus the time
    it slept. The same reads in the same order give the same values on every run."""

    def __init__(self, epoch: float) -> None:
        self.ns = int(round(epoch * 1e9))
        self.lock = _thread.allocate_lock()

    def now_ns(self) -> int:
        with self.lock:
            self.ns += 1000
            return self.ns

    def now(self) -> float:
        return self.now_ns() / 1e9

    def advance(self, seconds: float) -> None:
        with self.lock:
            self.ns += int(seconds * 1e9)


def _install_determinism(spec, namespace) -> None:
    """Seed randomness and (with an ``epoch``) virtualise the wall clock, per
    ``codemode.runtimes.types.Determinism``. ``random`` and ``uuid`` are patched when first
    imported (importing them up front would cost start-up time). The clock: ``time`` is
    patched for everyone, and the code's own ``import datetime`` sees a view of the module
    whose ``datetime`` reads the virtual clock (``_code_builtins``)."""
    seed = int(spec["seed"])
    patches = {
        "random": lambda module: _seed_random(module, seed),
        "uuid": lambda module: _seed_uuid(module, seed),
        "numpy.random": lambda module: _seed_numpy(module, seed),
    }
    epoch = spec.get("epoch")
    if epoch is not None:
        clock = _VirtualClock(float(epoch))
        _patch_time(clock)
        namespace["__builtins__"] = _code_builtins(clock)
    finder = _PatchOnImport(patches)
    for name in list(patches):
        if name in sys.modules:
            finder.apply(sys.modules[name])
    sys.meta_path.insert(0, finder)


class _PatchOnImport:
    """A meta-path finder that lets the real finders load a module, then patches it."""

    def __init__(self, patches) -> None:
        self.patches = patches

    def apply(self, module) -> None:
        patch = self.patches.pop(module.__name__, None)
        if patch is not None:
            patch(module)

    def find_spec(self, name, path=None, target=None):
        if name not in self.patches:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader, self)
                return spec
        return None


class _PatchingLoader:
    def __init__(self, loader, finder: _PatchOnImport) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        self._loader.exec_module(module)
        self._finder.apply(module)

    def __getattr__(self, name):  # get_source, is_package, ... for tracebacks and inspect
        return getattr(self._loader, name)


def _seed_random(module, seed: int) -> None:
    """``random`` draws from ``seed``; an unseeded ``Random()`` is seeded from it too
    (``SystemRandom`` stays the OS's entropy)."""
    base_seed = module.Random.seed
    lock = _thread.allocate_lock()
    made = [0]

    def seed_(self, a=None, version=2):
        if a is None:
            with lock:
                made[0] += 1
                a = "codemode:%d:%d" % (seed, made[0])
        base_seed(self, a, version)

    seed_.__doc__ = base_seed.__doc__
    module.Random.seed = seed_
    module.seed(seed)


def _seed_numpy(module, seed: int) -> None:
    """numpy's global generator (``np.random.rand``) and an unseeded ``default_rng()`` draw
    from ``seed``, as ``random`` does."""
    module.seed(seed % 2**32)
    base_default_rng = module.default_rng
    lock = _thread.allocate_lock()
    made = [0]

    def default_rng(seed_=None):
        if seed_ is None:
            with lock:
                made[0] += 1
                seed_ = [seed % 2**32, made[0]]
        return base_default_rng(seed_)

    default_rng.__doc__ = base_default_rng.__doc__
    module.default_rng = default_rng


def _seed_uuid(module, seed: int) -> None:
    import random

    rng = random.Random("codemode-uuid:%d" % seed)
    lock = _thread.allocate_lock()
    uuid_cls = module.UUID

    def uuid4():
        with lock:
            bits = rng.getrandbits(128)
        return uuid_cls(int=bits, version=4)

    uuid4.__doc__ = module.uuid4.__doc__
    module.uuid4 = uuid4


def _patch_time(clock: _VirtualClock) -> None:
    import time

    real_sleep, real_localtime, real_gmtime = time.sleep, time.localtime, time.gmtime
    real_ctime, real_asctime, real_strftime = time.ctime, time.asctime, time.strftime

    def sleep(seconds):
        real_sleep(seconds)
        clock.advance(seconds)

    def localtime(seconds=None):
        return real_localtime(clock.now() if seconds is None else seconds)

    def gmtime(seconds=None):
        return real_gmtime(clock.now() if seconds is None else seconds)

    def ctime(seconds=None):
        return real_ctime(clock.now() if seconds is None else seconds)

    def asctime(t=None):
        return real_asctime(real_localtime(clock.now()) if t is None else t)

    def strftime(format, t=None):
        return real_strftime(format, real_localtime(clock.now()) if t is None else t)

    time.time = clock.now
    time.time_ns = clock.now_ns
    time.sleep = sleep
    time.localtime, time.gmtime, time.ctime, time.asctime, time.strftime = localtime, gmtime, ctime, asctime, strftime


def _code_builtins(clock: _VirtualClock):
    """The builtins the code runs with: Python's, except that the code's ``import datetime``
    (and ``from datetime import datetime``, ``__import__("datetime")``) gives a view of the
    module whose ``datetime`` class reads the virtual clock.

    ``sys.modules["datetime"]`` keeps the real module and its real types. C extensions import
    ``datetime.datetime`` by attribute (Cython's type import: pandas, pyarrow ...) and check
    that it is the static type they were built against; a subclass there makes them fail or
    crash. Libraries' own ``datetime.now()`` therefore reads the real clock; their
    ``time.time()``, ``date.today()`` and ``datetime.today()`` read the virtual one."""
    real_import = builtins.__import__
    view = []

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        module = real_import(name, globals, locals, fromlist, level)
        if name != "datetime" or level != 0:
            return module
        if not view:
            view.append(_datetime_view(module, clock))
        return view[0]

    __import__.__doc__ = real_import.__doc__
    code_builtins = dict(builtins.__dict__)
    code_builtins["__import__"] = __import__
    return code_builtins


def _datetime_view(module, clock: _VirtualClock):
    """A copy of the ``datetime`` module for the code, with ``datetime`` replaced by a
    subclass whose ``now()`` / ``utcnow()`` read the clock (``today()`` and
    ``date.today()`` already call ``time.time()``). Its metaclass keeps ``isinstance`` and
    ``issubclass`` true for every real ``datetime``, as freezegun does, and makes it equal to
    the real class (a table keyed by type finds it), and everything it
    makes (its constructor included) is a real ``datetime``: values the code hands to
    pandas, pickle or JSON are the type they expect."""
    real = module.datetime
    utc = module.timezone.utc

    class _Meta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, real)

        def __eq__(cls, other):  # a lookup keyed by type (pydantic's schemas) finds the real one's entry
            return other is cls or other is real

        def __hash__(cls):
            return hash(real)

    class datetime(real, metaclass=_Meta):
        def __new__(cls, *args, **kwargs):
            return real(*args, **kwargs)

        @classmethod
        def now(cls, tz=None):
            return real.fromtimestamp(clock.now(), tz)

        @classmethod
        def utcnow(cls):
            return real.fromtimestamp(clock.now(), utc).replace(tzinfo=None)

    datetime.__module__ = real.__module__
    datetime.__qualname__ = real.__qualname__
    datetime.__doc__ = real.__doc__
    view = type(module)(module.__name__, module.__doc__)
    view.__dict__.update(module.__dict__)
    view.datetime = datetime
    return view


# -- set-up -----------------------------------------------------------------------------


def _drop_privileges(spec: str) -> None:
    uid, _, gid = spec.partition(":")
    os.setgroups([])
    os.setresgid(int(gid), int(gid), int(gid))
    os.setresuid(int(uid), int(uid), int(uid))
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("codemode runner: could not drop root privileges")


def _apply_limits(limits) -> None:
    import resource

    def cap(which, value, hard=None) -> None:
        if value is None:
            return
        value = int(value)
        hard = value if hard is None else int(hard)
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            value, hard = min(value, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (value, hard))

    cpu = limits.get("cpu_seconds")
    cap(resource.RLIMIT_CPU, cpu, None if cpu is None else int(cpu) + 2)
    # The data segment (heap and private writable mappings), not the address space: the
    # shared libraries of pandas and matplotlib take 400 MB of address space for 135 MB
    # resident, so an address-space cap of 256 MB refused `import pandas`.
    cap(resource.RLIMIT_DATA, limits.get("memory_bytes"))
    cap(resource.RLIMIT_NPROC, limits.get("processes"))
    cap(resource.RLIMIT_FSIZE, limits.get("file_bytes"))
    cap(resource.RLIMIT_CORE, 0)


def _redirect_stdio():
    """Keep private copies of fds 0 and 1 for the protocol; point the code's stdin at
    /dev/null and its stdout at fd 2 (the output the host drains)."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    import io

    raw = io.BufferedWriter(io.FileIO(1, "w", closefd=False), buffer_size=1 << 16)
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace")
    sys.stdout = sys.stderr = out
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    return os.fdopen(proto_in, "rb"), proto_out


def _close_other_fds(keep) -> None:
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 256))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _compile(code: str):
    """Compile with top-level ``await`` allowed; the last expression statement becomes an
    assignment to ``OUTPUT_NAME`` (the value of the code, as in Monty)."""
    import _ast

    flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, CODE_FILE, "exec", flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = tree.body[-1]
        where = {k: getattr(last, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
        target = _ast.Name(id=OUTPUT_NAME, ctx=_ast.Store(), **where)
        tree.body[-1] = _ast.Assign(targets=[target], value=last.value, **where)
    return compile(tree, CODE_FILE, "exec", flags, dont_inherit=True)


_SOURCE: list = []  # the user's code, for tracebacks (linecache is loaded lazily)
_RESERVE: list = []  # memory released on MemoryError to report it
_LOOP: list = []  # the event loop of async code


def main(argv) -> None:
    if "--drop-to" in argv:
        _drop_privileges(argv[argv.index("--drop-to") + 1])
    reader, write_fd = _redirect_stdio()
    _close_other_fds({reader.fileno(), write_fd})
    if "--warm" in argv:  # a warm interpreter (runtimes/warm_pool.py): what every run needs, now,
        import _ast  # noqa: F401
        import asyncio  # noqa: F401
        import io  # noqa: F401
        import resource  # noqa: F401
        import selectors  # noqa: F401
        import time  # noqa: F401
        import warnings  # noqa: F401

        os.write(write_fd, WARM_LINE)  # then tell the host it waits for its bootstrap
    boot = _loads(reader.readline())
    limits = boot.get("limits", {})
    _apply_limits(limits)
    transport = boot.get("transport", {})
    if transport.get("kind") == "http":
        reader.close()
        os.close(write_fd)
        channel = HttpChannel(transport["url"], transport["token"], transport.get("unix_socket"))
    else:
        channel = StdioChannel(reader, write_fd, marks=bool(boot.get("output_marks")))
    sys.path.extend(p for p in boot.get("sys_path", []) if p not in sys.path)

    clock = _Clock(float(limits.get("timeout_seconds", 30.0)))
    signal.signal(signal.SIGXCPU, clock._expired)
    runner = Runner(channel, clock)
    if boot.get("session"):
        _serve_session(channel, runner, boot)  # never returns
    exit_code = 0
    try:
        code = boot["code"]
        _SOURCE.append(code)
        try:
            code_obj = _compile(code)
        except SyntaxError as exc:
            channel.send(_syntax_error(exc))
            os._exit(0)
        except ValueError as exc:  # e.g. a NUL byte in the source
            channel.send({"type": "error", "kind": "syntax", "error_type": "SyntaxError", "message": str(exc)})
            os._exit(0)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        namespace.update(boot.get("inputs") or {})
        functions = boot.get("functions", [])
        _install_tools(namespace, runner, functions)
        is_coroutine = bool(code_obj.co_flags & 0x80)  # inspect.CO_COROUTINE
        if is_coroutine or "asyncio" in code or any(f.get("is_async") for f in functions):
            runner.install_event_loop_policy()
        if boot.get("determinism"):
            _install_determinism(boot["determinism"], namespace)
        _RESERVE.append(bytearray(4 << 20))
        channel.send({"type": "ready"})
        msg = _run(code_obj, namespace, clock, is_coroutine)
    except BaseException as exc:  # the runner itself failed: report what we can
        msg = _error_message("runtime", exc)
        exit_code = 1
    clock.stop()
    _flush_output()
    try:
        channel.send(msg)
    except (TypeError, ValueError):  # an output JSON cannot hold (e.g. a circular list)
        channel.send({"type": "done", "output": repr(msg.get("output"))})
    os._exit(exit_code)


# -- session mode -------------------------------------------------------------------------


def _serve_session(channel, runner: Runner, boot) -> None:
    """Session mode (bootstrap ``session``): one namespace, many cells. Each ``cell``
    message (``code``, ``functions``, ``inputs``, ``limits``) runs in the namespace the
    earlier cells left; its calls are numbered from 1; the reply is the usual ``done`` or
    ``error`` plus ``variables`` (name -> type name), and the runner waits for the next cell.
    What a cell did before an error stays. Stdio channels only (the reader thread receives
    the cells); the host closing the channel ends the process."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update(boot.get("inputs") or {})
    runner.install_event_loop_policy()  # any later cell may use asyncio
    if boot.get("determinism"):
        _install_determinism(boot["determinism"], namespace)  # one seed and clock for the whole session
    _RESERVE.append(bytearray(4 << 20))
    slot = channel.expect_cell()
    channel.send({"type": "ready"})
    while True:
        cell = slot.wait()
        slot = channel.expect_cell()
        channel.begin_cell()
        try:
            reply = _run_cell(channel, runner, cell, namespace)
        except BaseException as exc:  # the runner itself failed: report it, stay usable
            reply = _error_message("runtime", exc)
        namespace.pop(OUTPUT_NAME, None)
        reply["variables"] = _variables(namespace)
        _flush_output()
        try:
            channel.send(reply)
        except (TypeError, ValueError):  # an output JSON cannot hold
            reply["output"] = repr(reply.get("output"))
            channel.send(reply)


def _run_cell(channel, runner: Runner, cell, namespace):
    code = cell.get("code") or ""
    limits = cell.get("limits") or {}
    clock = _Clock(float(limits.get("timeout_seconds", 30.0)))
    runner.clock = clock
    runner.reported = None  # call ids start again at 1: a "blocked" on "1" is news again
    signal.signal(signal.SIGXCPU, clock._expired)
    _cpu_budget(limits.get("cpu_seconds"))
    _SOURCE[:] = [code]
    _install_tools(namespace, runner, cell.get("functions", []))
    namespace.update(cell.get("inputs") or {})
    try:
        code_obj = _compile(code)
    except SyntaxError as exc:
        return _syntax_error(exc)
    except ValueError as exc:
        return {"type": "error", "kind": "syntax", "error_type": "SyntaxError", "message": str(exc)}
    channel.send({"type": "ready"})
    is_coroutine = bool(code_obj.co_flags & 0x80)
    return _run(code_obj, namespace, clock, is_coroutine)


def _cpu_budget(seconds) -> None:
    """``RLIMIT_CPU`` counts the whole process: give this cell ``seconds`` beyond what the
    earlier cells used (the soft limit; SIGXCPU is the cell's timeout)."""
    if seconds is None:
        return
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = int(usage.ru_utime + usage.ru_stime) + int(seconds)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    except (ValueError, OSError):
        pass


#: Variables a cell's reply lists at most.
_MAX_VARIABLES = 500


def _variables(namespace):
    """Name -> type name of what the cells left in the namespace (not our tool stubs)."""
    found = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or getattr(value, "__codemode_tool__", False) or isinstance(value, ToolNamespace):
            continue
        if name == OUTPUTS_GLOBAL:  # ours, like the tool stubs
            continue
        found[name] = type(value).__name__
        if len(found) >= _MAX_VARIABLES:
            break
    return found


def _run_coroutine(coro) -> None:
    """Run the code's top-level coroutine (code with top-level ``await``) to its end on a
    event loop (the same for every cell of a session). The pyodide runtime's guest replaces this: there the event loop is
    the JavaScript one, already running, and ``pyodide.ffi.run_sync`` waits for it."""
    import asyncio

    if not _LOOP:  # one loop for every cell of a session (a task may outlive its cell)
        _LOOP.append(asyncio.new_event_loop())
        asyncio.set_event_loop(_LOOP[0])
    _LOOP[0].run_until_complete(coro)


def _run(code_obj, namespace, clock: _Clock, is_coroutine: bool):
    try:
        save = _prepare_outputs(namespace)
        clock.start()
        try:
            if is_coroutine:
                _run_coroutine(eval(code_obj, namespace))
            else:
                exec(code_obj, namespace)
        finally:
            clock.stop()
        if save is not None:
            _save_outputs(save)
        _flush_output()
        return {"type": "done", "output": namespace.get(OUTPUT_NAME)}
    except CodeTimeout as exc:
        return _error_message("timeout", exc, "TimeoutError")
    except MemoryError as exc:
        _RESERVE.clear()  # room to format the error while the code's data is still alive
        return _error_message("resource", exc, message=str(exc) or "out of memory (the memory limit was reached)")
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return {"type": "done", "output": None}
        return _error_message("runtime", exc, message=f"the code called exit({exc.code!r})")
    except BaseException as exc:
        return _error_message("runtime", exc)


if __name__ == "__main__":
    main(sys.argv[1:])
