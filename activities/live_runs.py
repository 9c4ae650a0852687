"""The live-run cache of a worker's sandbox steps (``SandboxHost.live``).

What a worker keeps live between steps, purely as a cache in front of the durable state:
runs of runtimes without checkpoints (a keep-alive window), checkpointed runs kept after their
step (keyed by checkpoint hash; let go after the same keep-alive if they do not step again, so a
run that waits for a person holds no process), deferred runs (spilled to the store when the cache must let
them go), sessions kept live between cells, and saved sessions kept warm.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from codemode.runtimes import CodeExecution, CodeRuntime
from codemode.runtimes.errors import SandboxError
from codemode.runtimes.session import CodeSession

from .checkpoint_deletion import CheckpointDeletions
from .checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable
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
    """What this worker keeps live, and the ways in and out of the cache. ``runtimes``: the
    runtimes built so far (the host's: a cached run holds one of their sandboxes);
    ``runtime``: build one by name."""

    def __init__(
        self,
        checkpoints: CheckpointStore,
        runtimes: Mapping[str, CodeRuntime],
        runtime: Callable[[str], CodeRuntime],
        in_background: Callable[[Coroutine[Any, Any, Any]], None],
        deletions: CheckpointDeletions,
        *,
        keep_alive_seconds: float = 60.0,
        snapshot_cache_size: int | None = None,
        snapshot_cache_bytes: int = 256 * 1024 * 1024,
        session_keep_alive_seconds: float = 900.0,
    ) -> None:
        self.checkpoints = checkpoints
        self._runtimes = runtimes
        self.runtime = runtime
        self._in_background = in_background
        self.deletions = deletions
        self.keep_alive_seconds = keep_alive_seconds
        #: Live processes of runtimes without checkpoints, by session id (a keep-alive window).
        self.sessions: dict[str, LiveSession] = {}
        #: Steps of live processes a tool activity began and left running (``hand_over``).
        self._handed_over: dict[str, asyncio.Future[StepResult]] = {}
        #: Checkpointed executions kept live after their step, keyed by execution and
        #: checkpoint hash: the next step on this worker skips the load and restore when it
        #: is handed the very same checkpoint. Purely a cache: the stored checkpoint stays
        #: the durable truth. A miss costs a load, a hash check and a restore in a fresh
        #: sandbox process (about 10% of a worker's CPU per tool call with 50 executions
        #: running, issue 11), so the cache holds as many executions as run at once, up to
        #: ``snapshot_cache_size`` (None: all but two of the runtime's pool, Monty's
        #: ``max_processes``; 64 for a runtime without one) and ``snapshot_cache_bytes`` of
        #: their checkpoints.
        self.snapshot_cache_size = snapshot_cache_size
        self.snapshot_cache_bytes = snapshot_cache_bytes
        self.snapshots: OrderedDict[str, LiveSession] = OrderedDict()
        #: Deferred runs the cache let go, dumped to the store (not referenced by any history:
        #: a cache spill, deleted by the step that restores it, else by the retention sweep),
        #: so the next step here restores them instead of leaving a rebuild to the workflow.
        self.spilled: OrderedDict[str, asyncio.Future[tuple[CheckpointRef, LiveSession] | None]] = OrderedDict()
        #: Sessions between cells (``workflows/session_workflow.py``). A runtime that cannot dump a
        #: session (python) keeps it live here for ``session_keep_alive_seconds`` after its
        #: last cell; its next cell comes to this worker's queue, and anywhere else (or later)
        #: the session is rebuilt by replaying its cells. A session whose state was saved
        #: (monty) stays warm here too, purely as a cache in front of that state.
        self.session_keep_alive_seconds = session_keep_alive_seconds
        self.kept_sessions: dict[str, KeptSession] = {}
        self.warm_sessions: OrderedDict[str, CodeSession] = OrderedDict()

    async def aclose(self) -> None:
        """Close everything kept live (the spills finish first: each closes its sandbox)."""
        for sid in list(self.sessions):
            await self.drop(sid)
        for key in list(self.kept_sessions):
            await self.drop_kept(key)
        while self.warm_sessions:
            _, warm = self.warm_sessions.popitem()
            await warm.close()
        while self.snapshots:
            _, live = self.snapshots.popitem()
            await live.execution.close()
        spills, self.spilled = list(self.spilled.values()), OrderedDict()
        await asyncio.gather(*spills, return_exceptions=True)

    async def drop(self, session_id: str) -> None:
        live = self.sessions.pop(session_id, None)
        if live is not None:
            if live.expiry is not None:
                live.expiry.cancel()
            await live.execution.close()

    def holds_process(self, session_id: str) -> bool:
        """Whether this worker keeps the live process ``session_id`` (or is still stepping it)."""
        return session_id in self.sessions or session_id in self._handed_over

    def hand_over(self, session_id: str, step: asyncio.Future[StepResult]) -> None:
        """A step of live process ``session_id`` that a tool activity started and could not
        wait for: it goes on here, and the workflow's resume step for the same answers (which
        comes to this worker's own queue) takes its outcome instead of stepping again. Forgotten
        after the keep-alive if no step asks (the process it leaves has a keep-alive of its own)."""
        self._handed_over[session_id] = step
        step.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved, never logged twice
        forget = self._handed_over.pop
        asyncio.get_running_loop().call_later(self.keep_alive_seconds, forget, session_id, None)

    async def handed_over_step(self, session_id: str | None) -> StepResult | None:
        """The outcome of the step handed over for ``session_id``, if one was (else None)."""
        step = self._handed_over.pop(session_id, None) if session_id else None
        return None if step is None else await step

    def keep(self, live: LiveSession) -> str:
        sid = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        live.expiry = loop.call_later(self.keep_alive_seconds, lambda: self._in_background(self.drop(sid)))
        self.sessions[sid] = live
        return sid

    def cache_snapshot(self, runtime: str, key: str, live: LiveSession) -> None:
        # A cached execution holds one of the runtime's sandboxes: with a bounded pool, keep
        # at least two of them free so cached runs can never starve new steps.
        held = self._runtimes.get(runtime)
        capacity = held.live_capacity if held is not None else None
        limit = self.snapshot_cache_size or (DEFAULT_CACHE if capacity is None else capacity)
        if capacity is not None:
            limit = min(limit, capacity - 2)
        if limit <= 0:
            self.close_later(live.execution)
            return
        loop = asyncio.get_running_loop()
        now = live.cached_at = loop.time()
        self.snapshots[key] = live
        # A run that does not step again within the keep-alive (one waiting for a person, for
        # days) lets its sandbox go: the pool's processes are then free to close when idle.
        if live.expiry is not None:  # cached again: its keep-alive starts over
            live.expiry.cancel()
        live.expiry = loop.call_later(self.keep_alive_seconds, self._expire_snapshot, key, live)
        held = sum(entry.size for entry in self.snapshots.values())
        while len(self.snapshots) > limit or (held > self.snapshot_cache_bytes and len(self.snapshots) > 1):
            old_key = next(iter(self.snapshots))
            if len(self.snapshots) > limit and now - self.snapshots[old_key].cached_at < HOT_SECONDS:
                old_key = key  # every run here steps soon: let the newcomer go (HOT_SECONDS)
            old = self.snapshots.pop(old_key)
            held -= old.size
            self._let_go(old_key, old)

    def _expire_snapshot(self, key: str, live: LiveSession) -> None:
        if self.snapshots.get(key) is live:  # (a step took it meanwhile: not this one's to expire)
            self._let_go(key, self.snapshots.pop(key))

    def _let_go(self, key: str, old: LiveSession) -> None:
        """Close a run the cache no longer holds, or spill it first when it was kept live
        instead of a checkpoint (deferred)."""
        if old.expiry is not None:
            old.expiry.cancel()
        if old.scope is None:
            self.close_later(old.execution)
            return
        self.spilled[key] = asyncio.get_running_loop().create_task(self.spill(old))
        while len(self.spilled) > SPILLS_KEPT:
            _, forgotten = self.spilled.popitem(last=False)
            forgotten.cancel()

    async def spill(self, live: LiveSession) -> tuple[CheckpointRef, LiveSession] | None:
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

    async def take_spill(self, key: str) -> tuple[CheckpointRef, LiveSession] | None:
        """The spill of the deferred run evicted under ``key`` (now no longer remembered)."""
        spill = self.spilled.pop(key, None)
        if spill is None:
            return None
        try:
            return await spill
        except asyncio.CancelledError:
            return None

    async def unspill(self, key: str) -> tuple[CodeExecution, LiveSession] | None:
        """The deferred run spilled under ``key``, restored (its spill deleted), or None."""
        spilled = await self.take_spill(key)
        if spilled is None:
            return None
        ref, live = spilled
        assert live.scope is not None
        try:
            blob = await self.checkpoints.load(live.scope, ref)
            self.deletions.delete_later(live.scope, ref)
            execution = await self.runtime(live.execution.runtime).restore(blob)
        except (CheckpointUnusable, SandboxError) as err:
            log.info("could not restore a spilled live run: %s", err)
            return None
        return (execution, live) if execution is not None else None

    def close_later(self, execution: CodeExecution) -> None:
        self._in_background(execution.close())

    def keep_session(self, session: CodeSession, owner: str) -> str:
        key = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        expiry = loop.call_later(self.session_keep_alive_seconds, lambda: self._in_background(self.drop_kept(key)))
        self.kept_sessions[key] = KeptSession(session, expiry, owner)
        return key

    def kept_session_owners(self) -> list[tuple[str, str]]:
        """(session workflow id, key) of every session kept live here."""
        return [(kept.owner, key) for key, kept in self.kept_sessions.items() if kept.owner]

    async def drop_kept(self, key: str) -> None:
        kept = self.kept_sessions.pop(key, None)
        if kept is not None:
            if kept.expiry is not None:
                kept.expiry.cancel()
            await kept.session.close()

    def keep_warm(self, key: str, session: CodeSession) -> None:
        capacity = getattr(self._runtimes.get(session.runtime), "max_processes", None)
        limit = WARM_SESSIONS if capacity is None else min(WARM_SESSIONS, max(capacity // 4, 0))
        if limit <= 0:
            self._in_background(session.close())
            return
        self.warm_sessions[key] = session
        while len(self.warm_sessions) > limit:
            _, old = self.warm_sessions.popitem(last=False)
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
