"""One Monty execution's state (``_MontyRun``): the live VM snapshot, the calls shown to the
host, the answers given, the stdout sink, and how the code reaches namespaced functions (host
objects Monty routes method calls of back to the host). ``MontyRuntime`` (``monty.py``) starts,
restores and checkpoints them; a session's cells (``monty_session.py``) run them too."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pydantic_monty as pm

from .checkpoint import encode_checkpoint
from .errors import CodeExecutionError, CodeResourceError, ExecutionProtocolError, SandboxError
from .execution import Blocked, CallOutcome, CodeExecution, Step
from .monty_errors import map_monty_error, monty_exception
from .prelude import Prelude
from .signatures import ToolSignature, namespace_class, namespaces_of
from .types import Determinism, ExecutionLimits, ExecutionResult, FunctionCall

log = logging.getLogger(__name__)

MONTY_VERSION: str = pm.__version__
#: The file names Monty gives a checkout's feeds, in order: a prelude (``runtimes/prelude.py``)
#: is fed first, so its positions are in the first and the code's in the second (the code of a
#: run without one is the first). tests/runtimes/test_prelude.py holds Monty to it.
FEED_FILES = ("<python-input-0>", "<python-input-1>")


def _call_id(vm_id: int) -> str:
    """Our call id for a Monty call: numbered from 1, like every other runtime's (Monty
    numbers from 0)."""
    return str(int(vm_id) + 1)


def _vm_id(call_id: str) -> int:
    return int(call_id) - 1


#: Closes started for cancelled steps (kept referenced until they finish).
_CLOSINGS: set[asyncio.Future[None]] = set()


def closing(close: Awaitable[None]) -> None:
    """Finish ``close`` whatever happens to the task that started it."""
    task = asyncio.ensure_future(close)
    _CLOSINGS.add(task)
    task.add_done_callback(_CLOSINGS.discard)


class _StdoutSink:
    """Collects print() output up to a byte budget, then notes the truncation."""

    def __init__(self, limit: int, already: int = 0) -> None:
        self.limit = limit
        self.used = already
        self.parts: list[str] = []
        self.truncated = False

    def __call__(self, stream: str, text: str) -> None:
        if self.truncated:
            return
        data = text.encode()
        room = self.limit - self.used
        if len(data) <= room:
            self.parts.append(text)
            self.used += len(data)
            return
        self.parts.append(data[: max(room, 0)].decode(errors="ignore"))
        self.parts.append(f"\n[output truncated: more than {self.limit} bytes printed]\n")
        self.used = self.limit
        self.truncated = True

    def text(self) -> str:
        return "".join(self.parts)


#: Namespaces (``memory.read_graph()``) are host objects Monty routes method calls of back
#: to the host: a ``ClassInstance`` sent when the code first reads the name. Their ids are
#: derived from the namespace's name, so a snapshot restored in any process still routes.
_NAMESPACE_IDS = uuid.UUID("5d0f3c5e-7a8b-4f6e-9c1d-2b3a4c5d6e7f")


def _namespace_id(namespace: str) -> uuid.UUID:
    return uuid.uuid5(_NAMESPACE_IDS, f"instance:{namespace}")


class _Namespaces:
    """How code reaches namespaced functions: ``memory`` (an undefined name) is answered with
    a host object, whose method calls come back as calls with its id; reading a function
    without calling it (``f = memory.read_graph``) is answered with a host function named
    by its path, whose calls come back under that (dotted, so no plain name) name."""

    def __init__(self, signatures: Mapping[str, ToolSignature]) -> None:
        self.members = namespaces_of(signatures.values())
        self.by_id = {_namespace_id(ns): ns for ns in self.members}
        self.by_code_name = {s.code_name: s for s in signatures.values()}

    def value(self, namespace: str) -> Any:
        cls = type(namespace_class(namespace), (), {"__module__": "codemode.namespaces"})
        return pm.ClassInstance(
            cls(),
            id=_namespace_id(namespace),
            class_type=pm.ClassType(cls, id=uuid.uuid5(_NAMESPACE_IDS, f"class:{namespace}")),
        )

    def member(self, object_id: Any, attr: str) -> ToolSignature | None:
        ns = self.by_id.get(object_id)
        return self.members.get(ns, {}).get(attr) if ns is not None else None

    def function(self, sig: ToolSignature) -> Callable[..., Any]:
        def handle(*args: Any, **kwargs: Any) -> Any:  # never called here: the host answers the call
            raise RuntimeError("answered by the host")

        handle.__name__ = handle.__qualname__ = sig.code_name
        return handle


class _MontyRun:
    """The state behind one CodeExecution: the live snapshot, the calls shown, the answers."""

    def __init__(
        self,
        runtime: Any,  # the MontyRuntime that runs it
        session: Any,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        sink: _StdoutSink,
        *,
        code: str | None = None,
        tool_calls: int = 0,
        determinism: Determinism | None = None,
        cell: Any = None,  # the _MontySession it is a cell of (monty_session.py)
        prelude: Prelude | None = None,
    ) -> None:
        self.code = code
        #: Saved snippets defined before the code (fed first: the code's file is the second).
        self.prelude = prelude
        self.code_file = FEED_FILES[1] if prelude is not None else None
        #: The session this run is a cell of: its VM outlives the run (see ``close``).
        self.cell = cell
        self.determinism = determinism
        self.runtime = runtime
        self.session = session
        self.signatures = signatures
        self.namespaces = _Namespaces(signatures)
        self.limits = limits
        self.sink = sink
        self.snap: Any = None
        self.shown: dict[str, FunctionCall] = {}
        self.answers: dict[str, CallOutcome] = {}
        self.tool_calls = tool_calls
        self.started = time.perf_counter()
        self.compute_s = 0.0
        self.failed: BaseException | None = None
        #: An error of the first feed, raised by the first advance() (see execute()).
        self.deferred: CodeExecutionError | None = None
        self.closed = False

    async def _resume(self, start: Callable[[], Awaitable[Any]]) -> None:
        """Run the VM to its next suspension. ``start`` builds the awaitable inside the
        ``try``: Monty raises some errors (unconvertible values) synchronously."""
        t0 = time.perf_counter()
        try:
            self.snap = await start()
        except pm.MontyError as err:
            mapped = map_monty_error(err)
            if self.code_file is not None and isinstance(mapped, CodeExecutionError):
                mapped.line = _code_line(err, self.code_file)  # the code's line, not a snippet's
            self.failed = mapped
            if self.cell is not None and not isinstance(err, (pm.MontyCrashedError, pm.MontyShutdown)):
                self.snap = None  # the code raised: the session's VM is idle again, its globals kept
            await self.close()
            raise mapped from None
        except asyncio.CancelledError:
            # The step was cancelled while the VM ran (its run cancelled, or Core cancelling a
            # local step as it evicts the run): nobody will read this VM again (a retry
            # restores the checkpoint), so its process goes back to the pool, even if this
            # task is cancelled again meanwhile. Kept out, it held the pool open for good.
            self.failed = SandboxError("the step was cancelled while the code ran")
            closing(self.close())
            raise
        finally:
            self.compute_s += time.perf_counter() - t0

    async def _deliver(self, resume: Callable[[Any], Awaitable[Any]], outcome: CallOutcome, key: int | None) -> None:
        """Hand one answer to the VM. A return value Monty cannot convert (a host object
        it does not know) is raised in the code as ``TypeError`` rather than crashing the run;
        Monty leaves the snapshot resumable when it refuses a value."""
        answer = monty_exception(outcome)

        def start() -> Awaitable[Any]:
            try:
                return resume(answer if key is None else {key: answer})
            except pm.MontyError as err:
                if outcome.kind != "result":
                    raise
                refused = {"exc_type": "TypeError", "message": f"the tool result cannot be passed to the code: {err}"}
                return resume(refused if key is None else {key: refused})

        await self._resume(start)

    async def advance(self) -> Step:
        if self.deferred is not None:
            self.failed, self.deferred = self.deferred, None
            raise self.failed
        if self.failed is not None:
            raise ExecutionProtocolError(f"the execution already failed: {self.failed}")
        while True:
            snap = self.snap
            if isinstance(snap, pm.MontyComplete):
                result = ExecutionResult(
                    output=snap.output,
                    stdout=self.sink.text(),
                    stdout_truncated=self.sink.truncated,
                    duration_ms=self.compute_s * 1000,
                    tool_calls=self.tool_calls,
                )
                await self.close()
                return result
            if isinstance(snap, pm.AsyncNameLookupSnapshot):
                await self._lookup(snap)
                continue
            if isinstance(snap, pm.AsyncFunctionSnapshot):
                step = await self._on_call(snap)
                if step is not None:
                    return step
                continue
            if isinstance(snap, pm.AsyncFutureSnapshot):
                pending = [_call_id(i) for i in snap.pending_call_ids]
                ready = [c for c in pending if c in self.answers]
                if not ready:
                    return Blocked(tuple(pending))
                batch = {_vm_id(c): monty_exception(self.answers[c]) for c in ready}
                try:
                    started = snap.resume(batch)
                except pm.MontyError:
                    # Some value cannot enter the VM: answer one call at a time so only the
                    # call whose value was refused raises TypeError.
                    first = ready[0]
                    await self._deliver(snap.resume, self.answers.pop(first), _vm_id(first))
                    self.shown.pop(first, None)
                    continue
                for c in ready:
                    del self.answers[c]
                    self.shown.pop(c, None)
                await self._resume(lambda: started)
                continue
            raise SandboxError(f"unexpected Monty state {type(snap).__name__}")

    async def _lookup(self, snap: Any) -> None:
        """An undefined name (a namespace, else NameError in the code), or an attribute of a
        namespace read without a call (its function, else AttributeError)."""
        name = str(snap.variable_name)
        if snap.object_id is None:
            if name in self.namespaces.members:
                value = self.namespaces.value(name)
                await self._resume(lambda: snap.resume(value=value))
                return
        else:
            sig = self.namespaces.member(snap.object_id, name)
            if sig is not None:
                fn = self.namespaces.function(sig)
                await self._resume(lambda: snap.resume(value=fn))
                return
        await self._resume(lambda: snap.resume())

    async def _on_call(self, snap: Any) -> Step | None:
        if snap.is_os_function:
            await self._resume(lambda: snap.resume_not_handled())  # no OS access: Monty raises inside the code
            return None
        cid = _call_id(snap.call_id)
        name = str(snap.function_name)
        if snap.object_id is not None:
            sig = self.namespaces.member(snap.object_id, name)
            if sig is None:
                ns = self.namespaces.by_id.get(snap.object_id, "the object")
                await self._resume(
                    lambda: snap.resume({"exc_type": "AttributeError", "message": f"{ns} has no function {name!r}"})
                )
                return None
        else:  # a plain function, or a namespace's function read first (named by its path)
            sig = self.namespaces.by_code_name.get(name)
        if sig is not None:
            name = sig.name
        if cid in self.shown or cid in self.answers:
            if sig is not None and sig.is_async:
                # An async tool's call is a coroutine in the code (it may sit in a gather):
                # it must be resumed as a future; its answer, if already given, is
                # delivered when the code awaits it (a FutureSnapshot).
                await self._resume(lambda: snap.resume({"future": ...}))
                return None
            if cid in self.answers:
                self.shown.pop(cid, None)
                await self._deliver(snap.resume, self.answers.pop(cid), None)
                return None
            return Blocked((cid,))
        if sig is None:
            await self._resume(
                lambda: snap.resume({"exc_type": "NameError", "message": f"name '{name}' is not defined"})
            )
            return None
        self.tool_calls += 1
        if self.tool_calls > self.limits.max_tool_calls:
            err = CodeResourceError(
                f"too many tool calls: the limit is {self.limits.max_tool_calls}",
                error_type="ResourceError",
                line=_line_of(snap, self.code),
            )
            self.failed = err
            await self.close()
            raise err
        call = FunctionCall(
            call_id=cid,
            function_name=name,
            args=list(snap.args),
            kwargs=dict(snap.kwargs),
            concurrent=sig.is_async,
            line=_line_of(snap, self.code, self.code_file),
            origin=self._origin(snap),
        )
        self.shown[cid] = call
        return call

    def _origin(self, snap: Any) -> str | None:
        """The origin of the prelude part whose body made the call (read from the VM's position
        of the call, which the code cannot forge), or None."""
        if self.prelude is None:
            return None
        try:
            where = snap.position
            if str(where.filename) != FEED_FILES[0]:
                return None
            part = self.prelude.part_at(int(where.start))
        except (AttributeError, TypeError, ValueError):
            return None
        return part.origin if part is not None else None

    async def answer(self, call_id: str, outcome: CallOutcome) -> None:
        self.answers[call_id] = outcome

    def dump(self) -> bytes | None:
        if self.snap is None or isinstance(self.snap, pm.MontyComplete) or self.closed:
            return None
        return self._envelope(self.snap.dump())

    async def adump(self) -> bytes | None:
        """``dump()`` without blocking the event loop: the session's own dump of its
        suspended state (the same bytes as the snapshot's, measured), awaited rather than a
        synchronous round trip to the Monty subprocess."""
        if self.snap is None or isinstance(self.snap, pm.MontyComplete) or self.closed:
            return None
        return self._envelope(await self.session.dump())

    def _envelope(self, vm: bytes) -> bytes:
        meta: dict[str, Any] = {
            "functions": {n: s.model_dump(mode="json") for n, s in self.signatures.items()},
            "pending": [c.model_dump(mode="json") for c in self.shown.values()],
            "answers": {
                cid: {"kind": o.kind, "value": o.value, "exc_type": o.exc_type, "message": o.message}
                for cid, o in self.answers.items()
            },
            "limits": self.limits.model_dump(mode="json"),
            "tool_calls": self.tool_calls,
            "stdout_bytes": self.sink.used,
            "code": self.code,
            "determinism": self.determinism.model_dump(mode="json") if self.determinism else None,
        }
        if self.prelude is not None:  # restored, its calls keep their origins
            meta["prelude"] = self.prelude.model_dump(mode="json")
        if self.cell is not None:  # a cell: restored, its session goes on after it
            meta["cell"] = self.cell.meta()
        return encode_checkpoint("monty", MONTY_VERSION, meta, vm)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        # A cell that finished (a result, or an error its code raised) leaves its session
        # idle and usable: only this run's handles go. One abandoned mid-feed (or whose
        # worker crashed) cannot take another feed: the session goes with it.
        idle = self.snap is None or isinstance(self.snap, pm.MontyComplete)
        session, self.session, self.snap = self.session, None, None  # drop VM handles now, not at exit
        if self.cell is not None:
            if idle and not isinstance(self.failed, SandboxError):
                return
            await self.cell.close()
            return
        try:
            await session.__aexit__(None, None, None)
        except Exception:  # the worker may already be gone; the pool replaces it
            log.debug("closing a Monty session failed", exc_info=True)

    def execution(self) -> CodeExecution:
        execution = CodeExecution(
            advance=self.advance,
            answer=self.answer,
            dump=self.dump,
            adump=self.adump,
            close=self.close,
            # shown to the host and not answered yet (answers wait in self.answers until
            # the VM asks for them)
            pending=[c for c in self.shown.values() if c.call_id not in self.answers],
            runtime="monty",
            read_stdout=self.sink.text,
        )
        execution.prelude = self.prelude
        return execution


def _line_of(snap: Any, code: str | None, code_file: str | None = None) -> int | None:
    """Line of a suspended call: Monty reports a byte offset into the source. ``code_file``:
    the code's feed when a prelude came first (a call made in the prelude has no line of the code)."""
    if not code:
        return None
    try:
        if code_file is not None and str(snap.position.filename) != code_file:
            return None
        start = int(snap.position.start)
    except Exception:
        return None
    return code.encode()[:start].count(b"\n") + 1


def _code_line(err: Any, code_file: str) -> int | None:
    """The innermost line of the code (not of a prelude's function) in an error's traceback."""
    try:
        lines = [f.line for f in err.traceback() if str(f.filename) == code_file]
    except Exception:  # noqa: BLE001 - an error without frames: no line
        return None
    return lines[-1] if lines else None
