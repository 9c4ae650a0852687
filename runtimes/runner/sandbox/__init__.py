"""The sandbox side of the real-CPython runtime (``codemode_runner``): standard library only,
Python 3.9 or newer.

The host ships this package as one zip archive (``runtimes/runner/package.py``), whose
``__main__.py`` is ``runtimes/runner/in_sandbox.py``, and runs it with ``python -I -S
runner.zip [--drop-to UID:GID]`` (locally the same through ``package.LAUNCHER``; ``-s -S
-P`` with ``PYTHONHASHSEED`` set when the execution has a seed; plain ``python3
runner.zip`` in an E2B sandbox, whose packages the code may use). The pyodide runtime's
guest imports its modules. The runner reads one JSON line (the bootstrap) on stdin,
defines one stub per host tool, runs the user's code and talks to the host over a
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
``uuid.uuid4`` and ``numpy.random`` are seeded per execution when first imported, and
with an ``epoch`` the wall clock (``time.time``, ``datetime.now`` ...) is a virtual one,
so that a journal replay of the same code makes the same calls.

Sync tools block the calling thread until the host answers. ``async def`` tools return a
coroutine: each call is sent when its task first runs, so ``asyncio.gather(f(1), f(2))``
shows both calls to the host before either needs its value. The event loop's selector tells
the host ``blocked`` when the loop is about to sleep with calls outstanding. Call ids are
sequential strings ("1", "2", ...), the same on every run of the same code.

Compute time: an ``ITIMER_REAL`` alarm paused while the code waits for the host raises a
timeout at the limit with the line the code was on; the host's own watchdog and
``RLIMIT_CPU`` back it up if the code ignores it.


Its files: ``wire`` (JSON), ``channels`` (stdio and HTTP), ``clock`` (the compute clock),
``determinism`` (seeds and the virtual clock), ``tools`` (the code's namespace: tool stubs),
``artifacts``, ``errors`` (in-band errors, tracebacks without our frames), ``execute``
(compile and run), ``session`` (session mode), ``main`` (set-up and one bootstrap's run).
"""
