"""What one worker's sandbox steps share, declared in one place: the tool registry, the
checkpoint store (and the artifacts kept through it), the runtimes (one pool each), this
worker's own task queue, the work left running off a step's critical path, the live runs it
keeps between steps (``live_runs.py``) and the checkpoints it deletes in batches
(``checkpoint_deletion.py``).

The parts of the sandbox steps (``step_loop.py``, ``session_cells.py``, ``cell_ends.py``,
``parking.py``, ``sandbox_sweep.py``) each hold this host; ``SandboxActivities``
(``sandbox_steps.py``) builds it and them."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any

from codemode.runtimes import CodeRuntime, get_runtime

from .artifacts import ArtifactLimits, ArtifactStore
from .checkpoint_deletion import CheckpointDeletions
from .checkpoints import CheckpointStore
from .live_runs import LiveRuns
from .tools import ToolRegistry


class SandboxHost:
    def __init__(
        self,
        registry: ToolRegistry,
        checkpoints: CheckpointStore,
        *,
        runtimes: Mapping[str, CodeRuntime] | None = None,
        session_queue: str | None = None,
        keep_alive_seconds: float = 60.0,
        snapshot_cache_size: int | None = None,
        snapshot_cache_bytes: int = 256 * 1024 * 1024,
        session_keep_alive_seconds: float = 900.0,
        artifact_limits: ArtifactLimits | None = None,
    ) -> None:
        self.registry = registry
        self.checkpoints = checkpoints
        self.artifacts = ArtifactStore(checkpoints, artifact_limits)
        #: The runtimes built so far, by name (``runtime()`` builds the others on first use).
        self.runtimes: dict[str, CodeRuntime] = dict(runtimes or {})
        #: This worker's own task queue: the next step of a run it keeps live comes there.
        self.session_queue = session_queue
        self._background: set[asyncio.Task[Any]] = set()
        self.deletions = CheckpointDeletions(checkpoints, self.in_background)
        self.live = LiveRuns(
            checkpoints,
            self.runtimes,
            self.runtime,
            self.in_background,
            self.deletions,
            keep_alive_seconds=keep_alive_seconds,
            snapshot_cache_size=snapshot_cache_size,
            snapshot_cache_bytes=snapshot_cache_bytes,
            session_keep_alive_seconds=session_keep_alive_seconds,
        )

    def runtime(self, name: str) -> CodeRuntime:
        if name not in self.runtimes:
            self.runtimes[name] = get_runtime(name)
        return self.runtimes[name]

    def in_background(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Work off the step's critical path (closing a sandbox, deleting an old checkpoint)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def aclose(self) -> None:
        """Let go of every live run, finish the work in the background, close the runtimes."""
        await self.live.aclose()
        self.deletions.reap()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        for rt in self.runtimes.values():
            await rt.aclose()
