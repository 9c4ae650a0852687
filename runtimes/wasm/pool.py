"""Warm Deno processes, so an execution does not wait for Pyodide to start.

A process serves one execution and then exits: Python's state (modules, monkeypatches,
globals) must never carry from one execution to the next, and a process is cheap to
replace from the snapshot. So the pool keeps ``size`` processes per spec loaded and
waiting (``ProcessSpec``: the memory cap, the packages). The replacement of a process
taken starts when its execution ends (``replenish``), not when it starts: loading a
snapshot takes a core for a while, which the running execution would otherwise share.
Specs are kept for the ``max_specs`` most recently used (a warm process holds about
200 MB).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from ..errors import SandboxError
from .deno import DenoProcess, ProcessSpec

StartFn = Callable[[ProcessSpec], Awaitable[DenoProcess]]


class WarmPool:
    def __init__(self, start: StartFn, *, size: int = 1, max_specs: int = 2) -> None:
        self._start = start
        self.size = max(0, size)
        self.max_specs = max(1, max_specs)
        self._warm: OrderedDict[ProcessSpec, list[asyncio.Task[DenoProcess]]] = OrderedDict()
        self._closed = False

    def _launch(self, spec: ProcessSpec) -> asyncio.Task[DenoProcess]:
        task = asyncio.create_task(self._start(spec))
        task.add_done_callback(_retrieve)
        return task

    def _refill(self, spec: ProcessSpec) -> None:
        tasks = self._warm.setdefault(spec, [])
        self._warm.move_to_end(spec)
        while len(tasks) < self.size:
            tasks.append(self._launch(spec))
        while len(self._warm) > self.max_specs:
            _, stale = self._warm.popitem(last=False)
            for task in stale:
                asyncio.create_task(_discard(task))

    async def acquire(self, spec: ProcessSpec, timeout: float) -> DenoProcess:
        """A warm process of ``spec`` (started now if none is ready)."""
        if self._closed:
            raise SandboxError("the pyodide runtime is closed")
        tasks = self._warm.get(spec) or []
        task = tasks.pop(0) if tasks else self._launch(spec)
        if spec in self._warm:
            self._warm.move_to_end(spec)
        for attempt in range(2):
            try:
                proc = await asyncio.wait_for(asyncio.shield(task), timeout)
            except TimeoutError:
                asyncio.create_task(_discard(task))
                raise SandboxError(f"no Pyodide process started within {timeout:g} s") from None
            except SandboxError:
                if attempt:
                    raise
                task = self._launch(spec)  # a warm process that failed: one fresh try
                continue
            if proc.alive:
                return proc
            await proc.aclose()
            task = self._launch(spec)
        raise SandboxError("the Pyodide process exited while it waited")

    def replenish(self, spec: ProcessSpec) -> None:
        """An execution of ``spec`` ended: start what the pool lacks of it."""
        if not self._closed:
            self._refill(spec)

    async def warm(self, spec: ProcessSpec) -> None:
        """Start the pool for ``spec`` and wait until its processes are ready."""
        self._refill(spec)
        await asyncio.gather(*self._warm[spec], return_exceptions=True)

    async def aclose(self) -> None:
        self._closed = True
        tasks = [t for group in self._warm.values() for t in group]
        self._warm.clear()
        await asyncio.gather(*(_discard(t) for t in tasks))


def _retrieve(task: asyncio.Task[DenoProcess]) -> None:
    if not task.cancelled():
        task.exception()  # a failed warm-up is reported when the process is taken


async def _discard(task: asyncio.Task[DenoProcess]) -> None:
    if not task.done():
        task.cancel()
    with contextlib.suppress(BaseException):
        proc = await task
        await proc.aclose()
