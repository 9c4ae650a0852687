"""Journal replay: rebuild a run that has no checkpoint from the results already recorded.

A sandbox that cannot snapshot (real CPython) survives a lost process by re-running the
code from the start in a fresh one and answering its first calls from the journal, the
tool results the workflow recorded, without running any tool again. Replay works for any
runtime (Monty too) because it only drives the ``CodeExecution`` protocol.

Each call the code makes is matched to the journal **by call id** (runtimes number calls
deterministically) and must have the recorded function name, args and kwargs (compared
as JSON), else ``NonDeterminismError``: the code read something that changed (the OS's
entropy, a monotonic clock, the environment, a file), and its history no longer describes
it.

What is replay-safe. Randomness and the wall clock are, when the replay runs with the
``Determinism`` the original run had (``CodeRuntime.execute(..., determinism=)``): the
``random`` module, unseeded ``random.Random()``, ``uuid.uuid4()`` and the order of a
``set`` of strings come from its seed; ``time.time()``, ``datetime.now()``,
``date.today()`` and friends read a virtual clock that starts at its ``epoch``. Without a
``Determinism`` the seed derives from the code and its inputs (random stays replay-safe)
and the clock is the real one (not replay-safe). Never replay-safe: ``os.urandom``,
``secrets``, ``random.SystemRandom``, ``uuid.uuid1()``, ``time.monotonic()`` /
``perf_counter()`` / ``loop.time()``, environment variables, files, the network,
``numpy.random`` and other generators of their own, and anything that depends on how
threads are scheduled. The rule for code: anything from outside that must not change on
a replay comes through a tool, whose result is journaled.

Why seed and freeze rather than record every value in the journal: a seed and an epoch
are two numbers per execution, where recording would add an entry per draw (a loop of a
million ``random()`` calls) to a history Temporal caps at 2 MB per payload; they need no
change to ``JournalEntry``; and they are what Temporal does for workflow code itself
(``workflow.random()``, ``workflow.now()``). The price: the clock does not follow real
time (a run parked for a day reads its ``epoch`` plus microseconds after the approval).

Calls the journal does not hold are the first event beyond it; ``replay`` returns them
(still pending on the execution) or the ``ExecutionResult``, exactly what ``next_batch()``
would have returned had the process never been lost. For a gathered batch whose results
were partly recorded, the recorded ones are answered and the rest are returned; if the
code goes on with calls the journal answers while those are outstanding, replay follows
it until the code needs one of the unrecorded answers.
"""

from __future__ import annotations

import hashlib
import json

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from pydantic import Field
from pydantic_core import to_json, to_jsonable_python

from .errors import ExecutionProtocolError, NonDeterminismError
from .execution import CallOutcome, CodeExecution
from .types import CompactModel, ExecutionResult, FunctionCall


class JournalEntry(CompactModel):
    """One recorded call and its outcome: a return value, or an exception to raise."""

    call_id: str
    function_name: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    result: Any = None
    #: A large result as its JSON text (``returned_json``): the workflow journals it unparsed.
    result_json: str | None = None
    #: Set for a call that raised: the exception type name and message to raise again.
    error_type: str | None = None
    error_message: str = ""
    #: A call refused because its arguments were over the per-value cap keeps their SHA-256
    #: (of their JSON) instead of them, which replay compares: megabytes never travel through
    #: the workflow, whose task would spend seconds on them (issue 43).
    args_sha256: str | None = None

    @classmethod
    def returned(cls, call: FunctionCall, value: Any) -> JournalEntry:
        return cls(call_id=call.call_id, function_name=call.function_name, args=call.args, kwargs=call.kwargs, result=value)

    @classmethod
    def returned_json(cls, call: FunctionCall, text: str) -> JournalEntry:
        """A return value given as its JSON text (a large tool result, ``ToolOutput.value_json``)."""
        return cls(
            call_id=call.call_id, function_name=call.function_name, args=call.args, kwargs=call.kwargs, result_json=text
        )

    def value(self) -> Any:
        """What the call returned (parsed here, in the sandbox's process, when it came as text)."""
        return json.loads(self.result_json) if self.result_json is not None else self.result

    @classmethod
    def raised(cls, call: FunctionCall, error_type: str, message: str) -> JournalEntry:
        return cls(
            call_id=call.call_id,
            function_name=call.function_name,
            args=call.args,
            kwargs=call.kwargs,
            error_type=error_type,
            error_message=message,
        )

    @classmethod
    def refused_oversized(cls, call: FunctionCall, error_type: str, message: str) -> JournalEntry:
        """A call refused for arguments over the cap: recorded with their digest, not them."""
        return cls(
            call_id=call.call_id,
            function_name=call.function_name,
            args_sha256=args_digest(call),
            error_type=error_type,
            error_message=message,
        )

    def outcome(self) -> CallOutcome:
        if self.error_type is not None:
            return CallOutcome.error(self.error_type, self.error_message)
        return CallOutcome.result(self.value())

    def describe(self) -> str:
        if self.args_sha256 is not None:
            return f"{self.function_name}(<arguments over the limit, sha256 {self.args_sha256[:12]}>)"
        return _describe(self.function_name, self.args, self.kwargs)


def _describe(name: str, args: list[Any], kwargs: Mapping[str, Any]) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= 200 else text[:196] + "...)"


def args_digest(call: FunctionCall) -> str:
    """The SHA-256 of a call's arguments as JSON (``JournalEntry.args_sha256``)."""
    return hashlib.sha256(to_json([call.args, call.kwargs], fallback=repr)).hexdigest()


def _same_call(call: FunctionCall, entry: JournalEntry) -> bool:
    if call.function_name != entry.function_name:
        return False
    if entry.args_sha256 is not None:
        return args_digest(call) == entry.args_sha256
    as_json = to_jsonable_python
    return as_json(call.args, fallback=repr) == as_json(entry.args, fallback=repr) and as_json(
        call.kwargs, fallback=repr
    ) == as_json(entry.kwargs, fallback=repr)


async def replay(
    execution: CodeExecution,
    journal: Iterable[JournalEntry | Mapping[str, Any]],
    *,
    before_answer: Callable[[JournalEntry], Awaitable[None]] | None = None,
) -> list[FunctionCall] | ExecutionResult:
    """Drive a fresh ``execution`` through ``journal``; return the first event beyond it.

    ``before_answer``: awaited before each recorded outcome is handed to the code (the
    network ratchet cuts the sandbox's network before a private tool's result, on a replay
    at the same point as the first time).

    :returns: the calls the journal does not answer (pending on ``execution``: run them,
        answer them, then continue with ``next_batch()``), or the ``ExecutionResult`` when
        the code finishes within the journal.
    :raises NonDeterminismError: a call differs from the recorded one, the code finishes
        while recorded calls remain unmade, or it makes calls the journal skips over. The
        execution is closed first. Code errors (``CodeRuntimeError``...) propagate as
        from ``next_batch()``.
    """
    entries = [e if isinstance(e, JournalEntry) else JournalEntry.model_validate(e) for e in journal]
    remaining: dict[str, JournalEntry] = {}
    for entry in entries:
        if entry.call_id in remaining:
            raise ValueError(f"the journal records call id {entry.call_id!r} twice")
        remaining[entry.call_id] = entry
    beyond: list[FunctionCall] = []  # calls the journal does not answer, left pending
    try:
        while True:
            try:
                event = await execution.next_batch()
            except ExecutionProtocolError:
                # Blocked on calls only the caller can answer (the journal answered the rest).
                waiting = {c.call_id for c in execution.pending_calls}
                if not beyond or not waiting <= {c.call_id for c in beyond}:
                    raise
                if remaining:
                    raise _unmade(remaining, "stopped at calls the journal does not hold") from None
                return beyond
            if isinstance(event, ExecutionResult):
                if remaining:
                    raise _unmade(remaining, "finished")
                return event
            for call in event:
                entry = remaining.pop(call.call_id, None)
                if entry is None:
                    beyond.append(call)
                    continue
                if not _same_call(call, entry):
                    raise NonDeterminismError(
                        f"on replay call {call.call_id} is "
                        f"{_describe(call.function_name, call.args, call.kwargs)} but the journal recorded "
                        f"{entry.describe()}: the code does not make the same calls when run again "
                        "(does it read the clock, randomness or the environment?)",
                        error_type="NonDeterminismError",
                        line=call.line,
                    )
                if before_answer is not None:
                    await before_answer(entry)
                outcome = entry.outcome()
                if outcome.kind == "result":
                    await execution.provide_result(outcome.value, call_id=call.call_id)
                else:
                    await execution.provide_error(outcome.exc_type, outcome.message, call_id=call.call_id)
            if beyond and not remaining:
                return beyond
    except NonDeterminismError:
        await execution.close()
        raise


def _unmade(remaining: Mapping[str, JournalEntry], how: str) -> NonDeterminismError:
    first = next(iter(remaining.values()))
    return NonDeterminismError(
        f"on replay the code {how} without making {len(remaining)} recorded call(s), first "
        f"{first.describe()} (call id {first.call_id}): it does not make the same calls when run again",
        error_type="NonDeterminismError",
    )
