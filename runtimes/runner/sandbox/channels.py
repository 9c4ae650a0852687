"""The callback channel to the host: JSON lines on stdio, or HTTP (``urllib``)."""

from __future__ import annotations

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

from .wire import _dumps, _loads

_THREAD_STACK = 512 * 1024

_CLOCK_SIGNALS = {signal.SIGALRM, signal.SIGXCPU}
_SIG_BLOCK = getattr(signal, "SIG_BLOCK", 0)
_SIG_SETMASK = getattr(signal, "SIG_SETMASK", 2)


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
    (calls made so far, calls still waiting for an answer, cells begun in session mode). A
    host re-attaching to a runner it did not watch (nothing emitted meanwhile reached it)
    checks that it is where the checkpoint says before trusting it.
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
                self.send(
                    {"type": "synced", "nonce": msg.get("nonce"), "calls": calls, "waiting": waiting, "cells": cells}
                )
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
