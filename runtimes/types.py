"""Plain data that crosses the runtime boundary: events, limits, capabilities.

These are pydantic models because they cross process boundaries (activity results,
checkpoints, the sandbox wire protocol).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)
from pydantic_core import PydanticUndefined

_NO_DEFAULT = object()

#: The serialization context under which a ``CompactModel`` leaves its default fields out: what
#: goes into a workflow history (the payload converter, ``worker/converter.py``) and the state
#: segments a long run stores. Everywhere else (what a person or a program reads: ``--json``, the
#: MCP front's results, ``model_dump_json()``) a model has its full, documented shape.
HISTORY_CONTEXT: dict[str, Any] = {"codemode.history": True}


def compact_json(model: BaseModel) -> bytes:
    """``model``'s JSON as a history holds it (defaults left out)."""
    return model.model_dump_json(context=HISTORY_CONTEXT).encode()


class CompactModel(BaseModel):
    """A model whose JSON in a workflow history leaves out fields that hold their default value.

    For records written once per tool call into a workflow history (call requests, step
    results, journal entries): the history pays for every byte, thousands of times per run,
    and the receiving side fills the defaults back in. Only under ``HISTORY_CONTEXT`` (the
    payload converter's): any other dump has every field, as the documentation shows them."""

    # (no return annotation: with one, pydantic takes it for the serialized JSON schema, and a
    # record's schema in serialization mode would read "anything")
    @model_serializer(mode="wrap")
    def _drop_defaults(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo):  # noqa: ANN202
        data = handler(self)
        if not isinstance(data, dict) or not (info.context or {}).get("codemode.history"):
            return data
        defaults = _defaults_of(type(self))
        return {k: v for k, v in data.items() if defaults.get(k, _NO_DEFAULT) != v}


_DEFAULTS: dict[type, dict[str, Any]] = {}


def _defaults_of(cls: type[BaseModel]) -> dict[str, Any]:
    """Each field's default as it serializes (None, numbers, strings, empty containers)."""
    found = _DEFAULTS.get(cls)
    if found is None:
        found = {}
        for name, field in cls.model_fields.items():
            if field.default_factory is not None:
                value = field.default_factory()  # type: ignore[call-arg]
                if value in ([], {}):
                    found[name] = value
            elif field.default is not PydanticUndefined and isinstance(field.default, (type(None), bool, int, float, str)):
                found[name] = field.default
        _DEFAULTS[cls] = found
    return found


class FunctionCall(BaseModel):
    """The code called a host function and waits (or will wait) for its result."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    function_name: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    #: True when the code made the call without needing its value yet (an async tool
    #: called inside ``asyncio.gather``): the host may call ``next()`` to see more calls.
    concurrent: bool = False
    #: Line of the call in the user's code, when the runtime knows it.
    line: int | None = None


class ExecutionResult(BaseModel):
    """The code finished. ``output`` is the value of its last expression (or None)."""

    output: Any = None
    stdout: str = ""
    stdout_truncated: bool = False
    duration_ms: float = 0.0
    tool_calls: int = 0


class ExecutionLimits(BaseModel):
    """Resource limits. Every limit has a default: an unbounded sandbox is a footgun
    (``"a" * 10**10`` would take 10 GB)."""

    #: Compute time of the code in seconds, summed over all its steps (time spent
    #: waiting for tools or approvals does not count).
    timeout_seconds: float = 30.0
    max_memory_bytes: int = 256 * 1024 * 1024
    max_tool_calls: int = 500
    max_stdout_bytes: int = 1024 * 1024


#: What the sandbox may reach of the network (seed 001): nothing (the default), everything, or
#: everything until the first result of a tool marked private arrives, then nothing for good.
NetworkPolicy = Literal["none", "full", "ratchet"]


class SandboxOptions(CompactModel):
    """What a request asks of the sandbox beyond its limits (seeds 001 and 004). A runtime that
    cannot honour one refuses the execution up front with ``CapabilityError`` (see
    ``RuntimeCapabilities``); nothing is silently ignored."""

    model_config = ConfigDict(frozen=True)

    #: Host path -> path in the sandbox, mounted read-only (skills, reference data).
    mounts: dict[str, str] = Field(default_factory=dict)
    network: NetworkPolicy = "none"
    #: Packages the code needs beyond what the sandbox has (names with optional pins).
    packages: list[str] = Field(default_factory=list)

    @field_validator("mounts")
    @classmethod
    def _absolute(cls, mounts: dict[str, str]) -> dict[str, str]:
        for src, dst in mounts.items():
            if not src.startswith("/") or not dst.startswith("/"):
                raise ValueError(f"mount {src}:{dst}: both paths must be absolute")
            if any(part == ".." for part in (*src.split("/"), *dst.split("/"))):
                raise ValueError(f"mount {src}:{dst}: '..' is not allowed in a mount path")
        return mounts

    @property
    def is_default(self) -> bool:
        return not self.mounts and self.network == "none" and not self.packages


class Determinism(BaseModel):
    """What the code sees of randomness and of the wall clock, fixed for one execution so
    that a journal replay (a fresh process answered from recorded results) makes the same
    calls as the original run. Temporal's own answer for workflow code: a seed and a time
    taken from history (``workflow.random()``, ``workflow.now()``), never the worker's.

    Runtimes that run our runner (python, e2b) apply it like this:

    * ``seed``: the ``random`` module is seeded with it; an unseeded ``random.Random()``
      gets a seed drawn from it; ``uuid.uuid4()`` draws from it; and ``PYTHONHASHSEED``
      derives from it, so iterating a ``set`` of strings has the same order every run.
    * ``epoch`` (Unix seconds): ``time.time()``, ``time.time_ns()``, ``datetime.now()``,
      ``utcnow()``, ``today()``, ``date.today()`` and ``time.localtime()`` /
      ``gmtime()`` / ``ctime()`` / ``asctime()`` / ``strftime()`` without an argument read
      a clock that starts at ``epoch`` and advances by one microsecond per read (so it
      never stands still and never repeats) and by the length of each ``time.sleep()``.
      It does not follow real time: a run parked for a day still reads ``epoch`` plus a
      few microseconds. None leaves the real clock (not replay-safe).

    Not covered (not replay-safe): ``time.monotonic()`` / ``perf_counter()`` /
    ``process_time()`` and ``loop.time()`` (durations are real), ``os.urandom``,
    ``secrets``, ``random.SystemRandom``, ``uuid.uuid1()``, the environment, files, the
    network, thread scheduling, and third-party generators (``numpy.random``). Monty
    honours ``seed`` and ``epoch`` through its ``os_policy`` (its clock is frozen at
    ``epoch``, monotonic clocks included).
    """

    model_config = ConfigDict(frozen=True)

    seed: int = Field(ge=0, lt=2**63)
    epoch: float | None = None
    #: ``PYTHONHASHSEED`` when it does not derive from ``seed``: the one a warm interpreter
    #: was started with (issue 40), recorded with the execution's first step so that a replay
    #: starts a cold interpreter with the same. Left out of the JSON when None (older
    #: histories and session digests read the same).
    python_hash_seed: int | None = Field(default=None, ge=1, lt=2**32, exclude_if=lambda v: v is None)
    #: This is an execution's first start: the runtime may choose the hash seed (a warm
    #: interpreter's) and report it (``CodeExecution.chosen_hash_seed``). Never serialized.
    _hash_seed_open: bool = PrivateAttr(default=False)

    @classmethod
    def derived(cls, code: str, inputs: Any = None) -> Determinism:
        """The default when the caller passes none: a seed from the code and its inputs (the
        same on every replay of this execution, but also for another execution of the same
        code and inputs), and the real clock."""
        import hashlib
        import json

        text = json.dumps([code, inputs], sort_keys=True, default=repr, separators=(",", ":"))
        return cls(seed=int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1)

    @property
    def hash_seed(self) -> int:
        """``PYTHONHASHSEED`` for this execution (1 .. 2**32 - 1; 0 would mean "disabled")."""
        if self.python_hash_seed is not None:
            return self.python_hash_seed
        return self.seed % 4294967295 + 1

    def first_start(self) -> Determinism:
        """This determinism, for an execution's first start: a runtime may start it on an
        interpreter whose hash seed it chose, and reports the seed for the caller to record."""
        if self.python_hash_seed is not None:
            return self
        copy = self.model_copy()
        copy._hash_seed_open = True
        return copy

    @property
    def hash_seed_open(self) -> bool:
        """Whether the runtime may choose the hash seed (``first_start``)."""
        return self._hash_seed_open

    def with_hash_seed(self, seed: int) -> Determinism:
        """This determinism with the hash seed an execution's first start used."""
        return self.model_copy(update={"python_hash_seed": seed})


class CheckpointTier(IntEnum):
    """How a parked execution survives (see DESIGN.md)."""

    SNAPSHOT = 1  # full VM snapshot bytes (Monty)
    SESSION = 2  # a remote session id (E2B paused sandbox)
    JOURNAL = 3  # nothing: rebuilt by replaying recorded tool results


class RuntimeCapabilities(BaseModel):
    """What a runtime can honour (seed 004, "Capability model")."""

    model_config = ConfigDict(frozen=True)

    name: str
    stdlib_imports: bool = True
    #: The stdlib modules importable, when only a subset is (None = all of them).
    importable_modules: list[str] | None = None
    third_party_packages: bool = False
    filesystem: bool = False
    network: bool = False
    checkpoint_tier: CheckpointTier = CheckpointTier.JOURNAL
    type_checking: bool = False
    #: Typical cost to start one execution, in milliseconds (order of magnitude).
    startup_latency_ms: float = 0.0
    #: ``SandboxOptions`` this runtime honours: read-only mounts, the network policies it
    #: can apply, packages installed per execution.
    mounts: bool = False
    network_policies: tuple[NetworkPolicy, ...] = ("none",)
    packages: bool = False
    #: ``CodeRuntime.open_session``: a namespace kept across executions (cells).
    sessions: bool = False
