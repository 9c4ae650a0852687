"""The live-run cache of a worker's sandbox steps (mixed into ``SandboxActivities``).

What a worker keeps live between steps, purely as a cache in front of the durable state:
runs of runtimes without checkpoints (a keep-alive window), checkpointed runs kept after their
step (keyed by checkpoint hash), deferred runs (spilled to the store when the cache must let
them go), sessions kept live between cells, and saved sessions kept warm.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass

from codemode.runtimes import CodeExecution
from codemode.runtimes.errors import SandboxError
from codemode.runtimes.session import CodeSession

from .checkpoints import CheckpointScope, CheckpointUnusable
from .models import CheckpointRef, StepResult
from .tools import ToolSpec

log = logging.getLogger(__name__)

#: Runs kept live between steps for a runtime without a pool that bounds them.
DEFAULT_CACHE = 64
#: A run cached less than this long ago is hot: it steps again soon. When more executions step
#: at once than the cache holds and even its oldest run is hot, the newcomer is let go instead
#: of the oldest. Letting go of the least recently used would evict, round after round, the very
#: run that steps next: every step would miss (a spill and a restore each), where keeping the
#: residents makes all of their steps hit (``bench/agent_workload.py`` at N = 100 and 200).
HOT_SECONDS = 10.0


@dataclass
class LiveSession:
    execution: CodeExecution
    specs: dict[str, ToolSpec]
    stdout_offset: int
    expiry: asyncio.TimerHandle | None = None
    #: Bytes of the checkpoint it stands for (a proxy for the heap it keeps in memory).
    size: int = 0
    #: Wall seconds of steps since its last saved checkpoint (what a rebuild would redo).
    unsaved_s: float = 0.0
    #: Set for a run kept live instead of a checkpoint (deferred): where to spill it if the
    #: cache must let it go.
    scope: CheckpointScope | None = None
    #: When it was last put in the cache (the event loop's clock).
    cached_at: float = 0.0


@dataclass
class KeptSession:
    """A session between cells that this worker keeps live (a runtime without a dump)."""

    session: CodeSession
    expiry: asyncio.TimerHandle | None = None
    #: The session's workflow id (told when this worker lets the process go at shutdown).
    owner: str = ""


class LiveRuns:
    """The cache's methods. The state they use is set up by ``SandboxActivities.__init__``."""

    async def _drop(self, session_id: str) -> None:
        live = self._sessions.pop(session_id, None)
        if live is not None:
            if live.expiry is not None:
                live.expiry.cancel()
            await live.execution.close()

    def holds_process(self, session_id: str) -> bool:
        """Whether this worker keeps the live process ``session_id`` (or is still stepping it)."""
        return session_id in self._sessions or session_id in self._handed_over

    def _hand_over(self, session_id: str, step: asyncio.Future[StepResult]) -> None:
        """A step of live process ``session_id`` that a tool activity started and could not
        wait for: it goes on here, and the workflow's resume step for the same answers (which
        comes to this worker's own queue) takes its outcome instead of stepping again. Forgotten
        after the keep-alive if no step asks (the process it leaves has a keep-alive of its own)."""
        self._handed_over[session_id] = step
        step.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, never logged twice
        forget = self._handed_over.pop
        asyncio.get_running_loop().call_later(self.keep_alive_seconds, forget, session_id, None)

    async def _handed_over_step(self, session_id: str | None) -> StepResult | None:
        """The outcome of the step handed over for ``session_id``, if one was (else None)."""
        step = self._handed_over.pop(session_id, None) if session_id else None
        return None if step is None else await step

    def _keep(self, live: LiveSession) -> str:
        sid = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        live.expiry = loop.call_later(self.keep_alive_seconds, lambda: self._in_background(self._drop(sid)))
        self._sessions[sid] = live
        return sid

    def _cache_snapshot(self, runtime: str, key: str, live: LiveSession) -> None:
        # A cached execution holds one of the runtime's sandboxes: with a bounded pool, keep
        # at least two of them free so cached runs can never starve new steps.
        held = self._runtimes.get(runtime)
        capacity = held.live_capacity if held is not None else None
        limit = self.snapshot_cache_size or (DEFAULT_CACHE if capacity is None else capacity)
        if capacity is not None:
            limit = min(limit, capacity - 2)
        if limit <= 0:
            self._close_later(live.execution)
            return
        now = asyncio.get_running_loop().time()
        live.cached_at = now
        self._snapshots[key] = live
        held = sum(entry.size for entry in self._snapshots.values())
        while len(self._snapshots) > limit or (held > self.snapshot_cache_bytes and len(self._snapshots) > 1):
            old_key = next(iter(self._snapshots))
            if len(self._snapshots) > limit and now - self._snapshots[old_key].cached_at < HOT_SECONDS:
                old_key = key  # every run here steps soon: let the newcomer go (HOT_SECONDS)
            old = self._snapshots.pop(old_key)
            held -= old.size
            if old.scope is None:
                self._close_later(old.execution)
                continue
            spill = asyncio.get_running_loop().create_task(self._spill(old))
            self._spilled[old_key] = spill
            while len(self._spilled) > SPILLS_KEPT:
                _, forgotten = self._spilled.popitem(last=False)
                forgotten.cancel()

    async def _spill(self, live: LiveSession) -> tuple[CheckpointRef, LiveSession] | None:
        """Dump an evicted deferred run to the store (then close it): the ref, or None."""
        assert live.scope is not None
        try:
            blob = await live.execution.checkpoint()
            return None if blob is None else (await self.checkpoints.save(live.scope, blob), live)
        except Exception as err:  # the workflow still holds what rebuilds it
            log.info("could not spill an evicted live run: %s", err)
            return None
        finally:
            await live.execution.close()

    async def _take_spill(self, key: str) -> tuple[CheckpointRef, LiveSession] | None:
        """The spill of the deferred run evicted under ``key`` (now no longer remembered)."""
        spill = self._spilled.pop(key, None)
        if spill is None:
            return None
        try:
            return await spill
        except asyncio.CancelledError:
            return None

    async def _unspill(self, key: str) -> tuple[CodeExecution, LiveSession] | None:
        """The deferred run spilled under ``key``, restored (its spill deleted), or None."""
        spilled = await self._take_spill(key)
        if spilled is None:
            return None
        ref, live = spilled
        assert live.scope is not None
        try:
            blob = await self.checkpoints.load(live.scope, ref)
            self._delete_later(live.scope, ref)
            execution = await self.runtime(live.execution.runtime).restore(blob)
        except (CheckpointUnusable, SandboxError) as err:
            log.info("could not restore a spilled live run: %s", err)
            return None
        return (execution, live) if execution is not None else None

    @property
    def live_sessions(self) -> int:
        """Sandboxes held live for runtimes without checkpoints (a parked run holds none)."""
        return len(self._sessions)

    @property
    def kept_sessions(self) -> int:
        """Sessions this worker keeps live between cells (python)."""
        return len(self._kept_sessions)

    def _keep_session(self, session: CodeSession, owner: str) -> str:
        key = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(self.session_keep_alive_seconds, lambda: self._in_background(self._drop_kept(key)))
        self._kept_sessions[key] = KeptSession(session, expiry, owner)
        return key

    def kept_session_owners(self) -> list[tuple[str, str]]:
        """(session workflow id, key) of every session kept live here."""
        return [(kept.owner, key) for key, kept in self._kept_sessions.items() if kept.owner]

    async def _drop_kept(self, key: str) -> None:
        kept = self._kept_sessions.pop(key, None)
        if kept is not None:
            if kept.expiry is not None:
                kept.expiry.cancel()
            await kept.session.close()

    def _keep_warm(self, key: str, session: CodeSession) -> None:
        capacity = getattr(self._runtimes.get(session.runtime), "max_processes", None)
        limit = WARM_SESSIONS if capacity is None else min(WARM_SESSIONS, max(capacity // 4, 0))
        if limit <= 0:
            self._in_background(session.close())
            return
        self._warm_sessions[key] = session
        while len(self._warm_sessions) > limit:
            _, old = self._warm_sessions.popitem(last=False)
            self._in_background(old.close())


#: Sessions kept warm after their cell (their state saved): at most this many, and a quarter
#: of the runtime's processes.
WARM_SESSIONS = 16
#: Evicted deferred runs whose spill this worker remembers (older ones are rebuilt instead).
SPILLS_KEPT = 4096


def cache_key(execution_id: str, ref: CheckpointRef) -> str:
    return f"{execution_id}:{ref.sha256}"


def live_key(execution_id: str, live: str) -> str:
    return f"{execution_id}~{live}"
