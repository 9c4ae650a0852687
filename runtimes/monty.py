"""``MontyRuntime``: the Rust interpreter that pauses at every tool call and snapshots its VM.

Tier-1 checkpoints: ``dump()`` is the VM snapshot (about 4 KB for a small heap) inside a
versioned envelope, so any process with the same Monty version can continue a run, and a
checkpoint from another version is refused with ``None``.

Monty runs in a pool of worker subprocesses (one pool per runtime instance); a crashed
worker never takes the host down. Requires PyPI ``pydantic-monty`` 1.4.x.
"""

from __future__ import annotations

import asyncio
import contextlib
import keyword
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

try:
    import pydantic_monty as pm
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "MontyRuntime needs the Monty interpreter: pip install 'pydantic-monty>=1.4,<1.5' "
        "(the PyPI package 'monty-python' is an unrelated project)"
    ) from exc

from .base import CodeRuntime
from .checkpoint import decode_checkpoint, encode_checkpoint
from .constraints import CodeConstraints
from .errors import (
    CodeExecutionError,
    CodeResourceError,
    CodeSyntaxError,
    CodeTypeError,
    ExecutionProtocolError,
    SandboxError,
)
from .execution import Blocked, CallOutcome, CodeExecution, Step
from .exit_settle import settle_at_exit
from .monty_checker import TypeChecker, bound_before, type_check_stubs
from .monty_errors import map_monty_error, monty_exception
from .session import CodeSession, bound_names, declared_globals
from .signatures import FunctionsSpec, ToolSignature, namespace_class, namespaces_of, normalize_functions
from .types import (
    CheckpointTier,
    Determinism,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    RuntimeCapabilities,
    SandboxOptions,
)

log = logging.getLogger(__name__)

MONTY_VERSION: str = pm.__version__

#: Stdlib modules Monty 1.4 imports and that work without host access: the list the prompt
#: offers. Measured against every name in ``sys.stdlib_module_names`` by
#: tests/runtimes/test_monty_constraints.py.
MONTY_MODULES = (
    "asyncio", "base64", "binascii", "bisect", "collections", "copy", "csv", "dataclasses",
    "datetime", "decimal", "functools", "hashlib", "itertools", "json", "math", "random", "re",
    "sys", "time", "tomllib", "typing", "unicodedata",
)  # fmt: skip

#: Also importable, but every filesystem call in them is denied (no mounts): not offered.
MONTY_OS_MODULES = ("os", "pathlib", "posixpath")

MONTY_CONSTRAINTS = CodeConstraints(
    importable_modules=MONTY_MODULES,
    supports_third_party_packages=False,
    supports_class_inheritance=False,
    supports_generators=False,
    supports_del=False,
    supports_filesystem=False,
    additional_instructions=(
        "This is Monty, a fast sandboxed subset of Python: no file or network access, "
        "a restricted standard library."
    ),
)

def _call_id(vm_id: int) -> str:
    """Our call id for a Monty call: numbered from 1, like every other runtime's (Monty
    numbers from 0)."""
    return str(int(vm_id) + 1)


def _vm_id(call_id: str) -> int:
    return int(call_id) - 1


def _processes_setting() -> int | None:
    value = os.environ.get("CODEMODE_MONTY_PROCESSES", "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 3:
        raise ValueError(f"CODEMODE_MONTY_PROCESSES={value!r}: expected a whole number of at least 3")
    return int(value)


async def _open_checker_pool(workers: int) -> Any:
    """The type checker's own pool (``monty_checker.py``)."""
    settle_at_exit()
    pool = pm.AsyncMonty(min_processes=1, max_processes=workers, checkout_timeout=60.0)
    await pool.__aenter__()
    return pool


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
        runtime: MontyRuntime,
        session: Any,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        sink: _StdoutSink,
        *,
        code: str | None = None,
        tool_calls: int = 0,
        determinism: Determinism | None = None,
        cell: _MontySession | None = None,
    ) -> None:
        self.code = code
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
            self.failed = mapped
            if self.cell is not None and not isinstance(err, (pm.MontyCrashedError, pm.MontyShutdown)):
                self.snap = None  # the code raised: the session's VM is idle again, its globals kept
            await self.close()
            raise mapped from None
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
            line=_line_of(snap, self.code),
        )
        self.shown[cid] = call
        return call

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
        return CodeExecution(
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


class _MontySession:
    """A Monty REPL session kept across cells: one pool worker whose VM keeps the globals
    between feeds. Its state between cells is the session's own dump (``load_session``
    restores it on any worker with the same Monty version); mid-cell it is the snapshot
    of the suspended feed, which carries the whole session too."""

    def __init__(
        self,
        runtime: MontyRuntime,
        session: Any,
        limits: ExecutionLimits,
        determinism: Determinism | None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.runtime = runtime
        self.pm = session
        self.limits = limits
        self.determinism = determinism
        meta = meta or {}
        #: Every global a cell may have bound (Monty cannot list its globals): what the
        #: type checker is told exists.
        self.names: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("names", ()))
        #: What the probe found so far (name -> type), the names bound since it last ran, and
        #: the names functions declare ``global`` (a call may rebind them: probed every time).
        self.known: dict[str, str] = {str(k): str(v) for k, v in dict(meta.get("known") or {}).items()}
        self.fresh: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("fresh", ()))
        self.globals: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("globals", ()))
        self.current: _MontyRun | None = None
        self.closed = False

    def meta(self) -> dict[str, Any]:
        names, fresh, kept = list(self.names), list(self.fresh), list(self.globals)
        return {"names": names, "known": self.known, "fresh": fresh, "globals": kept}

    def alive(self) -> bool:
        return not self.closed and self.pm is not None

    def busy(self) -> bool:
        return self.current is not None and not self.current.closed

    async def run_cell(
        self, code: str, functions: FunctionsSpec, inputs: Mapping[str, Any] | None
    ) -> CodeExecution:
        rt = self.runtime
        signatures = normalize_functions(functions)
        if rt.type_check_enabled:
            bound = bound_before(signatures, inputs or {}, self.names)
            await rt._checker.check_once(code, type_check_stubs(signatures), bound)
        for name in [*(inputs or {}), *bound_names(code)]:
            self.names[name] = None
            self.fresh[name] = None
        for name in declared_globals(code):
            self.globals[name] = None
        sink = _StdoutSink(self.limits.max_stdout_bytes)
        run = _MontyRun(rt, self.pm, signatures, self.limits, sink, code=code, determinism=self.determinism, cell=self)
        self.current = run
        return await rt._feed(run, code, inputs)

    async def dump(self) -> bytes:
        meta = {
            **self.meta(),
            "limits": self.limits.model_dump(mode="json"),
            "determinism": self.determinism.model_dump(mode="json") if self.determinism else None,
        }
        return encode_checkpoint(SESSION_FORMAT, MONTY_VERSION, meta, await self.pm.dump())

    async def variables(self) -> dict[str, str]:
        """The globals' types. Monty keeps the source of every feed in the session, so the
        probe is one expression (``[type(a).__name__, ...]``, no function, nothing bound)
        about the names bound since it last ran (and ``global`` ones): what it adds to the
        state is proportional to the cells' own code. A name that is not there (bound in a
        branch that did not run) raises NameError; the probe runs again without it."""
        names = [n for n in {**self.fresh, **self.globals} if n.isidentifier() and not keyword.iskeyword(n)]
        if not names:
            return dict(self.known)
        missing: set[str] = set()
        while True:
            asked = [n for n in names if n not in missing]
            if not asked:
                snap = None
                break
            try:
                snap = await self.pm.feed_start(
                    "[" + ", ".join(f"type({n}).__name__" for n in asked) + "]",
                    print_callback=lambda stream, text: None,
                )
                if isinstance(snap, pm.AsyncNameLookupSnapshot):
                    # Not there. (Answering the lookup with a value would bind the name: let
                    # it raise NameError, and ask again without it.)
                    missing.add(str(snap.variable_name))
                    await snap.resume()
                    continue
                break
            except pm.MontyRuntimeError:
                continue  # the NameError of the missing name
            except pm.MontyError as err:
                log.info("could not list the session's variables: %s", err)
                return dict(self.known)
        names = [n for n in names if n not in missing]
        for name in missing:
            self.known.pop(name, None)
        if snap is None:
            self.fresh.clear()
            return dict(self.known)
        if not isinstance(snap, pm.MontyComplete) or not isinstance(snap.output, list):
            await self.close()  # (type() shadowed by something that calls a tool): not usable as is
            return dict(self.known)
        for name, kind in zip(names, snap.output):
            self.known[name] = str(kind)
        self.fresh.clear()
        return dict(self.known)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        session, self.pm = self.pm, None
        try:
            await session.__aexit__(None, None, None)
        except Exception:
            log.debug("closing a Monty session failed", exc_info=True)

    def handle(self) -> CodeSession:
        return CodeSession(
            runtime="monty",
            run_cell=self.run_cell,
            dump=self.dump,
            variables=self.variables,
            close=self.close,
            alive=self.alive,
            busy=self.busy,
        )


#: The envelope runtime name of a session's state between cells (``load_session``), as
#: opposed to a suspended feed's snapshot ("monty", ``load_snapshot``).
SESSION_FORMAT = "monty-session"


def _line_of(snap: Any, code: str | None) -> int | None:
    """Line of a suspended call: Monty reports a byte offset into the source."""
    if not code:
        return None
    try:
        start = int(snap.position.start)
    except Exception:
        return None
    return code.encode()[:start].count(b"\n") + 1


def _monty_limits(limits: ExecutionLimits, *, session: bool = False) -> dict[str, Any]:
    return {
        "max_feed_duration_secs": limits.timeout_seconds,
        "max_memory": limits.max_memory_bytes,
        # Every call, future resolution and name lookup is a suspension: leave head room,
        # our own max_tool_calls is the limit users see. The pool counts them over the whole
        # checkout, so a session (many feeds) relies on our per-cell count and the time limit.
        "max_suspensions": 2**31 - 1 if session else max(1000, limits.max_tool_calls * 4),
    }


class MontyRuntime(CodeRuntime):
    """Monty sandbox. Stateless between steps: any process with the same Monty version can
    restore any checkpoint."""

    name = "monty"
    constraints = MONTY_CONSTRAINTS
    capabilities = RuntimeCapabilities(
        name="monty",
        stdlib_imports=True,
        importable_modules=list(MONTY_MODULES),
        third_party_packages=False,
        filesystem=False,
        network=False,
        checkpoint_tier=CheckpointTier.SNAPSHOT,
        type_checking=True,
        startup_latency_ms=5.0,
        sessions=True,
    )

    def __init__(
        self,
        *,
        type_check: bool = True,
        max_processes: int | None = None,
        min_processes: int = 1,
        os_policy: Mapping[str, Any] | None = None,
        checkout_timeout: float = 60.0,
    ) -> None:
        self.type_check_enabled = type_check
        #: Monty worker subprocesses at most. Every open execution holds one (even while it
        #: waits for a tool), so a checkout beyond waits up to ``checkout_timeout`` seconds,
        #: then fails with SandboxError. The pool starts them as needed (about 7 MB each plus
        #: the heap they hold) and keeps them; a worker keeps executions live between steps in
        #: them (``activities/live_runs.py``), so the default leaves room for many at once.
        #: ``CODEMODE_MONTY_PROCESSES`` sets it for a worker that runs more at once (issue 28:
        #: at 100 concurrent executions, 256 cost 10% less CPU per call than 64).
        self.max_processes = max_processes or _processes_setting() or max(64, 2 * (os.cpu_count() or 1))
        self._pool_args = {
            "min_processes": min_processes,
            "max_processes": self.max_processes,
            "checkout_timeout": checkout_timeout,
        }
        self._os_policy = dict(os_policy) if os_policy else None
        #: Checks code before it runs, in warm sessions of its own (``monty_checker.py``).
        self._checker = TypeChecker(_open_checker_pool, map_monty_error, self._os_policy)
        self._pool: Any = None
        self._pool_lock = asyncio.Lock()

    async def _get_pool(self) -> Any:
        async with self._pool_lock:
            if self._pool is None:
                settle_at_exit()
                pool = pm.AsyncMonty(**self._pool_args)
                await pool.__aenter__()
                self._pool = pool
            return self._pool

    async def aclose(self) -> None:
        await self._checker.aclose()
        async with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)

    @property
    def live_capacity(self) -> int:
        return self.max_processes

    async def _checkout(
        self,
        *,
        limits: ExecutionLimits | Mapping[str, Any],
        stubs: str | None,
        type_check: bool,
        os_policy: Mapping[str, Any] | None = None,
        repl: bool = False,
    ) -> Any:
        pool = await self._get_pool()
        session = pool.checkout(
            limits=_monty_limits(limits, session=repl) if isinstance(limits, ExecutionLimits) else dict(limits),
            type_check=type_check,
            type_check_stubs=stubs,
            os_policy=dict(os_policy) if os_policy is not None else self._os_policy,
        )
        try:
            await session.__aenter__()
        except TimeoutError:
            raise SandboxError(
                f"no Monty worker became free within {self._pool_args['checkout_timeout']:.0f} s: all "
                f"{self.max_processes} are held by executions that were not closed or are still running"
            ) from None
        except pm.MontyError as err:
            raise map_monty_error(err) from None
        return session

    def _determinism_policy(self, determinism: Determinism | None) -> dict[str, Any] | None:
        """Monty's own ``os_policy`` for a ``Determinism``: a seeded ``random`` and a clock
        frozen at ``epoch`` (None: the runtime's policy, the worker's entropy and clock)."""
        if determinism is None:
            return None
        import datetime

        policy = dict(self._os_policy or {})
        policy["random_start"] = {"seed": determinism.seed}
        if determinism.epoch is not None:
            policy["datetime"] = datetime.datetime.fromtimestamp(determinism.epoch, tz=datetime.timezone.utc)
        return policy

    async def execute(
        self,
        code: str,
        *,
        functions: FunctionsSpec,
        inputs: Mapping[str, Any] | None = None,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
    ) -> CodeExecution:
        self.check_options(options)
        limits = limits or ExecutionLimits()
        signatures = normalize_functions(functions)
        # The sandbox starts while the check runs; the code is fed only once it passed.
        checking = (
            asyncio.ensure_future(
                self._checker.check_once(code, type_check_stubs(signatures), bound_before(signatures, inputs or {}))
            )
            if self.type_check_enabled
            else None
        )
        try:
            session = await self._checkout(
                limits=limits,
                stubs=None,
                type_check=False,
                os_policy=self._determinism_policy(determinism),
            )
        except BaseException:
            if checking is not None:
                checking.cancel()
                with contextlib.suppress(BaseException):
                    await checking
            raise
        if checking is not None:
            try:
                await checking
            except BaseException:
                await session.__aexit__(None, None, None)
                raise
        sink = _StdoutSink(limits.max_stdout_bytes)
        run = _MontyRun(self, session, signatures, limits, sink, code=code, determinism=determinism)
        return await self._feed(run, code, inputs)

    async def _feed(self, run: _MontyRun, code: str, inputs: Mapping[str, Any] | None) -> CodeExecution:
        """Start ``code`` in the run's session and run it to its first event."""
        session = run.session
        try:
            started = session.feed_start(code, inputs=dict(inputs or {}), print_callback=run.sink)
        except pm.MontyError as err:  # refused before running: an input value Monty cannot hold
            run.snap = None  # nothing ran: a session's VM is still idle
            await run.close()
            raise TypeError(f"the inputs cannot be passed to Monty: {err}") from None
        try:
            await run._resume(lambda: started)  # closes the session itself when the code fails
        except (CodeSyntaxError, CodeTypeError):
            raise  # the code cannot start
        except CodeExecutionError as err:
            # It started and failed before its first call: report it from next(), like every
            # runtime, so the handle (and the stdout printed before the error) is available.
            run.failed = None
            run.deferred = err
        return run.execution()

    async def open_session(
        self,
        *,
        limits: ExecutionLimits | None = None,
        determinism: Determinism | None = None,
        options: SandboxOptions | None = None,
        state: bytes | None = None,
    ) -> CodeSession | None:
        self.check_options(options)
        limits = limits or ExecutionLimits()
        meta: dict[str, Any] = {}
        vm: bytes | None = None
        if state is not None:
            decoded = decode_checkpoint(state, SESSION_FORMAT, MONTY_VERSION)
            if decoded is None:
                return None  # another Monty version (or not a session's state): replay
            meta, vm = decoded
        pm_session = await self._checkout(
            limits=limits, stubs=None, type_check=False, os_policy=self._determinism_policy(determinism), repl=True
        )
        session = _MontySession(self, pm_session, limits, determinism, meta)
        if vm is not None:
            try:
                await pm_session.load_session(vm)
            except pm.MontyError as err:
                log.warning("Monty refused a session's state: %s", err)
                await session.close()
                return None
        return session.handle()

    async def type_check(self, code: str, signatures: FunctionsSpec) -> None:
        """Type-check against the tool stubs; raises ``CodeTypeError`` (or ``CodeSyntaxError``).

        Monty has no check-only call: the code is fed with a zero time budget, sleeps that
        return at once and a small heap, so at most a few instructions run. Nothing escapes:
        a tool call only suspends the VM (no host answers it here), print output is dropped
        and Monty denies OS access; the session is discarded."""
        await self._checker.check(code, type_check_stubs(normalize_functions(signatures)))

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        decoded = decode_checkpoint(checkpoint, "monty", MONTY_VERSION)
        if decoded is None:
            return None
        meta, payload = decoded
        try:
            signatures = {n: ToolSignature.model_validate(s) for n, s in meta["functions"].items()}
            limits = ExecutionLimits.model_validate(meta["limits"])
            pending = [FunctionCall.model_validate(c) for c in meta["pending"]]
            answers = {
                cid: CallOutcome(a["kind"], value=a["value"], exc_type=a["exc_type"], message=a["message"])
                for cid, a in meta.get("answers", {}).items()
            }
            determinism = Determinism.model_validate(meta["determinism"]) if meta.get("determinism") else None
        except (KeyError, TypeError, ValueError):
            log.warning("refusing a Monty checkpoint with an unreadable header")
            return None
        sink = _StdoutSink(limits.max_stdout_bytes, already=int(meta.get("stdout_bytes", 0)))
        cell_meta = meta.get("cell")
        session = await self._checkout(
            limits=limits,
            stubs=None,
            type_check=False,
            os_policy=self._determinism_policy(determinism),
            repl=isinstance(cell_meta, dict),
        )
        cell = None
        if isinstance(cell_meta, dict):  # a cell of a session: the snapshot holds the whole REPL
            cell = _MontySession(self, session, limits, determinism, cell_meta)
        run = _MontyRun(
            self,
            session,
            signatures,
            limits,
            sink,
            code=meta.get("code"),
            tool_calls=int(meta.get("tool_calls", 0)),
            determinism=determinism,
            cell=cell,
        )
        try:
            run.snap = await session.load_snapshot(payload, print_callback=sink)
        except pm.MontyError as err:
            log.warning("Monty refused a checkpoint: %s", err)
            await run.close()
            return None
        run.shown = {c.call_id: c for c in pending}
        run.answers = answers
        execution = run.execution()
        if cell is not None:
            cell.current = run
            execution.session = cell.handle()
        return execution
