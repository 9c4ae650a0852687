"""Warm interpreters for the python runtime (issue 40): a few jailed runner processes already
started, each used by exactly one execution and then discarded (one jail per run stays the
rule).

A fresh execution on the python runtime used to pay for a new interpreter in a new jail on
its critical path: bubblewrap, the interpreter's start, the runner, ``import asyncio`` (about
44 ms of CPU, 28 of them the import). A warm interpreter has done all of that and waits on
its stdin for the bootstrap (the code, the tools, the limits), which is the first thing that
makes it one execution's: until then it holds nothing of anyone's.

Its ``PYTHONHASHSEED`` is fixed when it starts, before any execution is known, so the pool
picks one at random and the execution that takes it records it with its first step
(``Determinism.python_hash_seed``): a replay elsewhere starts a cold interpreter with the same
seed. Only an execution's first start may take one (``Determinism.first_start``); a replay,
a session, a request with mounts or a transport other than stdio starts cold, as before.

The pool refills in the background after every take and never makes a step wait: an empty
pool means a cold start. ``CODEMODE_PYTHON_WARM`` sets its size (default 2, for a 2-core
worker; 0 turns it off).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from .env_numbers import number_from_env
from .jail.uids import UidLease
from .runner.process import SandboxProcess

log = logging.getLogger(__name__)

#: The setting, and its default (2 cores: one being taken while one is ready).
WARM_ENV = "CODEMODE_PYTHON_WARM"
DEFAULT_WARM = 2

#: What a warm runner writes once it waits for its bootstrap (the runner's own ``WARM_LINE``).
WARM_LINE = b'{"type": "warm"}\n'

_seeds = random.SystemRandom()


def warm_size_from_env() -> int:
    expected = "a whole number (0 turns warm interpreters off)"
    return int(number_from_env(WARM_ENV, DEFAULT_WARM, cast=int, minimum=0, expected=expected))


def new_hash_seed() -> int:
    """A ``PYTHONHASHSEED`` (1 .. 2**32 - 1: 0 would turn hash randomization off)."""
    return _seeds.randrange(1, 2**32)


@dataclass
class WarmInterpreter:
    """A started runner waiting for its bootstrap, and what it was started with."""

    process: SandboxProcess
    hash_seed: int
    uid_lease: UidLease | None = None

    @property
    def alive(self) -> bool:
        return self.process.proc.returncode is None

    async def discard(self) -> None:
        try:
            await self.process.aclose(grace=0.0)
        finally:
            if self.uid_lease is not None:
                self.uid_lease.release()
                self.uid_lease = None


@dataclass
class WarmPool:
    """Up to ``size`` warm interpreters made by ``spawn(hash_seed)``."""

    spawn: Callable[[int], Awaitable[WarmInterpreter]]
    size: int = DEFAULT_WARM
    _ready: deque[WarmInterpreter] = field(default_factory=deque)
    _filling: set[asyncio.Task[None]] = field(default_factory=set)
    _discarding: set[asyncio.Task[None]] = field(default_factory=set)
    _closed: bool = False
    #: Takes answered warm, and cold (the pool was empty): for the benchmarks and tests.
    hits: int = 0
    misses: int = 0

    def take(self) -> WarmInterpreter | None:
        """A warm interpreter, now, or None (the caller starts a cold one); either way the
        pool starts refilling in the background."""
        found = None
        while self._ready:
            candidate = self._ready.popleft()
            if candidate.alive:
                found = candidate
                break
            self._discard_later(candidate)
        if found is None:
            self.misses += 1
        else:
            self.hits += 1
        self.refill()
        return found

    def refill(self) -> None:
        while not self._closed and len(self._ready) + len(self._filling) < self.size:
            task = asyncio.create_task(self._fill_one())
            self._filling.add(task)
            task.add_done_callback(self._filling.discard)

    async def _fill_one(self) -> None:
        try:
            warm = await self.spawn(new_hash_seed())
        except Exception as exc:  # noqa: BLE001 (a cold start will say what is wrong; stop trying for now)
            log.warning("could not start a warm python interpreter: %s", exc)
            return
        if self._closed:
            await warm.discard()
            return
        self._ready.append(warm)

    def _discard_later(self, warm: WarmInterpreter) -> None:
        task = asyncio.create_task(warm.discard())
        self._discarding.add(task)
        task.add_done_callback(self._discarding.discard)

    @property
    def ready(self) -> int:
        return len(self._ready)

    async def aclose(self) -> None:
        self._closed = True
        for task in [*self._filling, *self._discarding]:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        while self._ready:
            await self._ready.popleft().discard()
