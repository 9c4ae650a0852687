"""``CodeExecution``: the one concrete execution handle, behaviour injected as callables.

The protocol (a generator reified as an object; seed 000, appendix B)::

    event = await execution.next()
    while isinstance(event, FunctionCall):
        await execution.provide_result(await run_tool(event), call_id=event.call_id)
        event = await execution.next()
    return event.output               # ExecutionResult

Concurrency. When the code starts several calls without needing their values yet
(``await asyncio.gather(fetch(1), fetch(2))`` on ``async def`` tools), every one of them is
visible to the host before any result is needed:

* After ``next()`` returns a ``FunctionCall`` the host may answer it
  (``provide_result`` / ``provide_error`` with its ``call_id``) or call ``next()`` again
  without answering. Calling ``next()`` with unanswered calls means "I will answer later,
  show me what else the code does meanwhile". A call with ``concurrent=False`` needs its
  value at once: the code makes no further call until it is answered.
* ``next_batch()`` runs the code until it cannot continue without answers and returns every
  call it made on the way (``list[FunctionCall]``), or the ``ExecutionResult``. Five gathered
  calls come back as one batch of five. This is what a stateless host (a Temporal activity)
  uses: run the batch concurrently, answer them all, call ``next_batch()`` again.
* ``next()`` called while the code is blocked on unanswered calls waits until some other
  task answers one of them, so a host that runs each call as an asyncio task can simply
  loop on ``next()``. A host with no such task must answer first (or use ``next_batch``).

Errors. ``CodeRuntime.execute()`` raises only when the code cannot start (syntax, type
checking, an option the runtime cannot honour). Anything that goes wrong while it runs (an
uncaught exception, the time, memory or tool-call limit) is raised by ``next()`` /
``next_batch()`` as a ``CodeExecutionError``; the handle then cannot continue, and
``stdout`` still holds what the code printed before.

Checkpoints. ``dump()`` taken while calls are pending captures that paused state (or
returns ``None`` when the runtime cannot checkpoint). ``CodeRuntime.restore(blob)`` returns
an execution paused at the same calls: ``pending_calls`` lists them, the host answers them
with ``provide_result`` / ``provide_error`` and then calls ``next()`` (or ``next_batch()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from . import artifacts
from .errors import ExecutionProtocolError
from .types import ExecutionResult, FunctionCall


@dataclass(frozen=True)
class Blocked:
    """Internal step outcome: the code cannot continue until some pending call is answered."""

    waiting_on: tuple[str, ...] = ()


@dataclass(frozen=True)
class CallOutcome:
    """The answer to one call: a return value, or an exception to raise inside the code."""

    kind: Literal["result", "error"]
    value: Any = None
    exc_type: str = "RuntimeError"
    message: str = ""

    @classmethod
    def result(cls, value: Any) -> CallOutcome:
        return cls("result", value=value)

    @classmethod
    def error(cls, exc_type: str, message: str) -> CallOutcome:
        return cls("error", exc_type=exc_type, message=message)


Step = FunctionCall | ExecutionResult | Blocked
AdvanceFn = Callable[[], Awaitable[Step]]
AnswerFn = Callable[[str, CallOutcome], Awaitable[None]]
DumpFn = Callable[[], "bytes | None"]
CloseFn = Callable[[], Awaitable[None]]
#: Cut the sandbox's network for good (the ratchet); True when it was cut now.
CutNetworkFn = Callable[[str], Awaitable[bool]]


async def _noop_close() -> None:
    return None


class CodeExecution:
    """A handle on one running piece of code. Every runtime returns this same class.

    :param advance: run the sandbox to its next step (a new call, the result, or ``Blocked``).
    :param answer: hand one call's outcome to the sandbox (it may only buffer it).
    :param dump: serialise the paused state, or ``None`` when impossible.
    :param close: release the sandbox (idempotent).
    :param pending: calls already shown to a host before a restore.
    :param read_stdout: what the code printed so far (since this handle was created).
    :param cut_network: disconnect the sandbox from the network for good (``network="ratchet"``).
    :param chosen_hash_seed: the ``PYTHONHASHSEED`` the runtime chose for this execution's
        first start (a warm interpreter's, ``Determinism.first_start``): the caller records it
        so a replay uses the same. None: the determinism's own.
    """

    def __init__(
        self,
        *,
        advance: AdvanceFn,
        answer: AnswerFn,
        dump: DumpFn | None = None,
        close: CloseFn | None = None,
        pending: Iterable[FunctionCall] = (),
        runtime: str = "",
        read_stdout: Callable[[], str] | None = None,
        adump: Callable[[], Awaitable[bytes | None]] | None = None,
        cut_network: CutNetworkFn | None = None,
        chosen_hash_seed: int | None = None,
    ) -> None:
        self.chosen_hash_seed = chosen_hash_seed
        self._read_stdout = read_stdout
        self._advance = advance
        self._answer = answer
        self._dump = dump
        self._adump = adump
        self._close = close or _noop_close
        self._cut_network = cut_network
        self._pending: dict[str, FunctionCall] = {c.call_id: c for c in pending}
        self._answered = asyncio.Event()
        self._finished = False
        self._closed = False
        self.runtime = runtime
        #: The session this execution runs in, when it is a cell (``runtimes/session.py``):
        #: it outlives the execution, and ``close()`` after the end leaves it usable.
        self.session: Any = None  # codemode.runtimes.session.CodeSession (which imports this module)
        #: The bytes of ``save_artifact`` calls, by call id, taken off the calls as they
        #: arrive (``runtimes/artifacts.py``): the step that answers one stores them.
        self.artifact_data: dict[str, bytes] = {}
        #: What ran before the code (``runtimes/prelude.py``: saved snippets), when anything did.
        self.prelude: Any = None  # codemode.runtimes.prelude.Prelude

    # -- state ------------------------------------------------------------------------

    @property
    def pending_calls(self) -> list[FunctionCall]:
        """Calls shown to the host and not answered yet, in the order they were made."""
        return list(self._pending.values())

    @property
    def stdout(self) -> str:
        """What the code printed since this handle was created (by execute or restore)."""
        return self._read_stdout() if self._read_stdout is not None else ""

    @property
    def finished(self) -> bool:
        return self._finished

    # -- driving ----------------------------------------------------------------------

    async def _step(self) -> Step:
        if self._closed:
            raise ExecutionProtocolError("the execution is closed")
        if self._finished:
            raise ExecutionProtocolError("the execution has already finished")
        step = await self._advance()
        if isinstance(step, FunctionCall):
            if step.function_name == artifacts.SAVE_ARTIFACT:
                step, data = artifacts.detach(step)
                if data is not None:
                    self.artifact_data[step.call_id] = data
            self._pending[step.call_id] = step
        elif isinstance(step, ExecutionResult):
            self._finished = True
            self._pending.clear()
        return step

    async def next(self) -> FunctionCall | ExecutionResult:
        """The next event of the code. See the module docstring for concurrency."""
        while True:
            self._answered.clear()
            step = await self._step()
            if not isinstance(step, Blocked):
                return step
            if not self._pending:
                raise ExecutionProtocolError("the sandbox is blocked but no call is pending")
            await self._answered.wait()

    async def next_batch(self) -> list[FunctionCall] | ExecutionResult:
        """Run until the code needs answers; return the calls it made meanwhile (or the result)."""
        calls: list[FunctionCall] = []
        while True:
            step = await self._step()
            if isinstance(step, FunctionCall):
                calls.append(step)
            elif isinstance(step, ExecutionResult):
                return step
            else:
                if calls:
                    return calls
                raise ExecutionProtocolError(
                    f"the code is waiting for answers to calls {list(step.waiting_on) or list(self._pending)}; "
                    "answer them before asking for the next batch"
                )

    def _resolve_call_id(self, call_id: str | None) -> str:
        if call_id is None:
            if len(self._pending) != 1:
                raise ExecutionProtocolError(
                    f"{len(self._pending)} calls are pending ({list(self._pending)}): pass call_id="
                )
            return next(iter(self._pending))
        if call_id not in self._pending:
            raise ExecutionProtocolError(f"no pending call with id {call_id!r} (pending: {list(self._pending)})")
        return call_id

    async def provide_result(self, value: Any, *, call_id: str | None = None) -> None:
        """Answer a call with its return value (``call_id`` may be omitted when one is pending)."""
        cid = self._resolve_call_id(call_id)
        await self._answer(cid, CallOutcome.result(value))
        del self._pending[cid]
        self.artifact_data.pop(cid, None)
        self._answered.set()

    async def provide_error(self, exc_type: str, message: str, *, call_id: str | None = None) -> None:
        """Raise ``exc_type(message)`` inside the code at the call, so it can ``try/except`` it."""
        cid = self._resolve_call_id(call_id)
        await self._answer(cid, CallOutcome.error(exc_type, message))
        del self._pending[cid]
        self.artifact_data.pop(cid, None)
        self._answered.set()

    def dump(self) -> bytes | None:
        """Checkpoint of the paused state, or None when this runtime cannot checkpoint."""
        if self._dump is None or self._finished or self._closed:
            return None
        return self._dump()

    async def checkpoint(self) -> bytes | None:
        """``dump()`` without blocking the event loop where the runtime can (Monty's VM is
        in a subprocess: a synchronous dump waits for it, about 0.6 ms a step under load)."""
        if self._adump is None or self._dump is None or self._finished or self._closed:
            return self.dump()
        return await self._adump()

    async def cut_network(self, reason: str) -> bool:
        """Take the sandbox off the network for the rest of the execution, before the code sees
        what comes next (seed 001's ratchet: a private tool's result is about to be answered).
        ``reason`` says why, for the runtime's log. True when the network was cut now; False
        when there was nothing to cut: no network (the default), already cut, or a runtime
        that has none to cut (it refused ``network="ratchet"`` at ``execute``). A failure to
        cut raises ``SandboxError``: the answer must not be delivered then."""
        if self._cut_network is None or self._closed:
            return False
        return await self._cut_network(reason)

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()

    async def __aenter__(self) -> CodeExecution:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
