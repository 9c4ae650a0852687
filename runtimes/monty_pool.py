"""The Monty process pool of one ``MontyRuntime``: opened on first use, closed when idle.

pydantic-monty's ``AsyncMonty`` starts worker processes as checkouts need them (up to
``max_processes``) and keeps every one it started: a worker that ran a burst of executions held
the burst's processes for good (issue 49: 10,000 runs parked after a burst, and the worker held
about 860 MB of idle Monty processes while they waited, 10x a fresh worker). This pool counts
the sessions out and, once none has been out for ``idle_seconds``, closes the whole pool (its
processes exit) and tells ``on_idle`` (the type checker closes its own). The next checkout
opens a new pool: a few milliseconds, once. A session held between steps (a live run) is out,
so a worker with live runs never closes its pool under them.

``CODEMODE_MONTY_IDLE_SECONDS`` sets ``idle_seconds`` (default 60; 0 keeps the pool for good)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pydantic_monty as pm

from .env_numbers import number_from_env
from .exit_settle import settle_at_exit

log = logging.getLogger(__name__)

DEFAULT_IDLE_SECONDS = 60.0


def idle_setting() -> float:
    return number_from_env(
        "CODEMODE_MONTY_IDLE_SECONDS",
        DEFAULT_IDLE_SECONDS,
        cast=float,
        minimum=0,
        expected="a number of seconds (0: never close)",
    )


class IdlePool:
    """``checkout(**options)`` gives an entered pydantic-monty session; its ``__aexit__``
    returns it. ``aclose()`` closes the pool for good (until the next checkout)."""

    def __init__(
        self,
        pool_args: dict[str, Any],
        *,
        idle_seconds: float,
        on_idle: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._pool_args = pool_args
        self.idle_seconds = idle_seconds
        self._on_idle = on_idle
        self._pool: Any = None
        self._lock = asyncio.Lock()
        self._out = 0
        self._last = 0.0
        self._watch: asyncio.Task[None] | None = None
        #: How many times the pool was closed for being idle (for tests and diagnostics).
        self.idle_closes = 0

    @property
    def open(self) -> bool:
        return self._pool is not None

    async def checkout(self, **options: Any) -> Any:
        """An entered session (raises what ``__aenter__`` raises: ``TimeoutError`` when no
        process became free, ``pm.MontyError``)."""
        self._out += 1  # counted before any await: the pool is never closed under a checkout
        try:
            pool = await self._opened()
            session = pool.checkout(**options)
            await session.__aenter__()
        except BaseException:
            self._returned()
            raise
        return _Out(session, self)

    async def aclose(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        async with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.__aexit__(None, None, None)

    async def _opened(self) -> Any:
        async with self._lock:
            if self._pool is None:
                settle_at_exit()
                pool = pm.AsyncMonty(**self._pool_args)
                await pool.__aenter__()
                self._pool = pool
                self._last = asyncio.get_running_loop().time()
                if self.idle_seconds > 0 and self._watch is None:
                    self._watch = asyncio.ensure_future(self._close_when_idle())
            return self._pool

    def _returned(self) -> None:
        self._out -= 1
        self._last = asyncio.get_running_loop().time()

    async def _close_when_idle(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                await asyncio.sleep(max(self.idle_seconds / 4, 0.05))
                if self._out or self._pool is None or loop.time() - self._last < self.idle_seconds:
                    continue
                async with self._lock:
                    if self._out or self._pool is None:
                        continue
                    pool, self._pool = self._pool, None
                    self._watch = None
                self.idle_closes += 1
                log.debug("closing the Monty pool: no session out for %.0f s", self.idle_seconds)
                with contextlib.suppress(Exception):
                    await pool.__aexit__(None, None, None)
                if self._on_idle is not None:
                    with contextlib.suppress(Exception):
                        await self._on_idle()
                return
        except asyncio.CancelledError:
            return


class _Out:
    """A session out of an ``IdlePool``: the session itself, returned once on ``__aexit__``."""

    __slots__ = ("_back", "_pool", "_session")

    def __init__(self, session: Any, pool: IdlePool) -> None:
        self._session, self._pool, self._back = session, pool, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    async def __aexit__(self, *exc: object) -> Any:
        if not self._back:
            self._back = True
            self._pool._returned()
        return await self._session.__aexit__(*exc)
