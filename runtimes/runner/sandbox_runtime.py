"""``SandboxRuntime``: one base for runtimes whose runner lives in a sandbox that outlives the
worker that started it (a container, a cloud sandbox).

The lifecycle is here once (``SandboxRuntime`` and its run, ``sandbox_run.py``): start the
sandbox and the runner in it, attach to the runner's stdio, answer its calls, detach and
pause while a run is parked, re-attach from the checkpoint's handle on any worker and check
the runner is where the checkpoint says (the protocol's ``sync``), refuse the checkpoint when
the sandbox is gone (the caller replays the journal), destroy the sandbox when the run ends,
and sweep the ones crashed workers left.

A provider implements only its session operations (``provider.py``).

The checkpoint is a small versioned blob: the handle and where the runner is (calls made,
calls waited on), never the heap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

from ..checkpoint import decode_checkpoint
from ..execution import CodeExecution
from ..session import CodeSession
from ..signatures import ToolSignature
from ..types import ExecutionLimits, SandboxOptions
from .driver import RunnerExit
from .provider import OwnSandbox, SandboxProvider
from .runtime import RunnerRuntime
from .sandbox_run import CHECKPOINT_VERSION, SandboxRun

log = logging.getLogger(__name__)

__all__ = ["SandboxRuntime"]


class SandboxRuntime(RunnerRuntime, SandboxProvider):
    """A runtime whose runner runs in a provider's sandbox; the sandbox is the checkpoint.

    Subclasses are providers: they set ``handle_keys`` and implement the session operations
    of ``SandboxProvider``."""

    def __init__(self) -> None:
        super().__init__()
        self._destroying = set()
        #: Why the last restore of a sandbox's checkpoint could not use it, by sandbox name.
        self._refused: dict[str, str] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def new_run(
        self,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        session: bool = False,
    ) -> SandboxRun:
        return SandboxRun(self, signatures, limits, options, session=session)

    def _decode(self, checkpoint: bytes) -> dict[str, Any] | None:
        decoded = decode_checkpoint(checkpoint, self.name, CHECKPOINT_VERSION)
        if decoded is None:
            return None
        meta = decoded[0]
        if not isinstance(meta, dict) or not meta.get(self.handle_keys[0]):
            return None
        return meta

    def _local_runs(self, name: str) -> list[SandboxRun]:
        return [run for run in self._live if isinstance(run, SandboxRun) and run.name == name]

    async def _reattached(self, meta: dict[str, Any]) -> SandboxRun | None:
        """The run ``meta`` describes, attached to its runner and checked; None (its
        sandbox destroyed) when the runner is gone or not where ``meta`` says."""
        try:
            run = SandboxRun.from_checkpoint(self, meta)
        except (KeyError, TypeError, ValueError):
            log.warning("refusing a %s checkpoint with an unreadable header", self.name)
            return None
        self.track(run)
        try:
            state = await run.reattach()
        except BaseException:
            self._live.discard(run)
            await run.detach()
            raise
        if state != "in_step":
            # Whatever is left cannot continue this run: the caller replays in a fresh sandbox.
            log.info("%s cannot continue this checkpoint (%s): destroying it", run.where, state)
            run.refused = state
            self._refused[run.name] = {
                "gone": f"{run.where} is gone (deleted, expired, or its runner exited)",
                "silent": f"the runner in {run.where} did not answer",
                "moved_on": f"the runner in {run.where} went on past this checkpoint",
            }.get(state, state)
            run.discarded = True
            await run.close()
            return None
        run.parked = True
        run.start_watchdog()
        return run

    def restore_refusal(self, checkpoint: bytes) -> str:
        meta = self._decode(checkpoint)
        if meta is None:
            return super().restore_refusal(checkpoint)
        return self._refused.pop(self.sandbox_of(meta), None) or f"{self.describe(meta)} cannot continue this run"

    async def restore(self, checkpoint: bytes) -> CodeExecution | None:
        meta = self._decode(checkpoint)
        run = await self._reattached(meta) if meta is not None else None
        if run is None:
            return None
        pending = list(run.outstanding.values())
        if run.session_mode:  # a cell of a session: the session goes on after it
            execution = run.cell_execution(pending=pending)
            execution.session = run.session()
            return execution
        return run.execution(pending=pending)

    async def restore_session(self, state: bytes) -> CodeSession | None:
        """The sandbox a dump between cells names, reconnected and checked like a restored
        checkpoint; None when it is gone or out of step (the caller replays the cells)."""
        meta = self._decode(state)
        if meta is None or not isinstance(meta.get("session"), dict) or meta["session"].get("open"):
            return None
        run = await self._reattached(meta)
        return run.session() if run is not None else None

    async def suspend(self, checkpoint: bytes) -> None:
        """Pause the sandbox (detaching this worker's handles first: a stream attached
        through a pause may wedge, E2B#1587)."""
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(self.sandbox_of(meta)):
            await run.detach()
            if not run.parked:  # it ran past this checkpoint: it cannot go on after the pause
                run.exit = RunnerExit(lost=f"{run.where} was paused under this handle")
                run.channel.sandbox_exited()
        await self.pause({k: meta[k] for k in self.handle_keys if k in meta})

    async def discard(self, checkpoint: bytes) -> None:
        meta = self._decode(checkpoint)
        if meta is None:
            return
        for run in self._local_runs(self.sandbox_of(meta)):
            run.discarded = True
            await run.close()
        await self.destroy({k: meta[k] for k in self.handle_keys if k in meta})

    def held_here(self) -> set[str]:
        """The sandboxes this worker has a handle on (running a step, or cached)."""
        return {run.name for run in self._live if isinstance(run, SandboxRun)}

    def sandbox_named_by(self, checkpoint: bytes) -> str | None:
        """The sandbox a checkpoint of this runtime names (None: not one of ours)."""
        meta = self._decode(checkpoint)
        return self.sandbox_of(meta) if meta is not None else None

    @staticmethod
    def expired(
        own: OwnSandbox, now: float, *, max_age: timedelta = timedelta(days=8), grace: timedelta = timedelta(minutes=10)
    ) -> str | None:
        """Why an unlabelled sandbox (made before sandboxes carried their execution) is an
        orphan: one that can no longer run, older than ``grace`` (another worker may be
        starting one right now), or any older than ``max_age`` (past every approval timeout).
        None: it may be a parked run's."""
        age = now - own.created
        if not own.usable and age >= grace.total_seconds():
            return f"it can no longer run (a failed start, or a worker killed while releasing it), {age:.0f}s old"
        if age >= max_age.total_seconds():
            return f"it is older than {max_age} (past every approval timeout)"
        return None

    async def sweep(
        self, *, max_age: timedelta = timedelta(days=8), grace: timedelta = timedelta(minutes=10)
    ) -> list[str]:
        """Destroy this runtime's orphans by age alone (``expired``), knowing nothing of
        Temporal; the worker's sweep (``activities/sandbox_sweep.py``) asks Temporal instead.
        Returns the names of those destroyed."""
        mine = self.held_here()
        now = time.time()
        removed = []
        for own in await self.list_own():
            name = self.sandbox_of(own.handle)
            if name in mine or self.expired(own, now, max_age=max_age, grace=grace) is None:
                continue
            if await self.destroy(own.handle):
                removed.append(name)
        if removed:
            log.info("destroyed %d orphaned %s sandboxes", len(removed), self.name)
        return removed

    async def aclose(self) -> None:
        """Close every handle of this runtime: destroy their sandboxes, except those whose
        checkpoint is current (they are only detached)."""
        await self.close_executions()
        while self._destroying:
            await asyncio.gather(*list(self._destroying), return_exceptions=True)
