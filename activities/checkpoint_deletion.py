"""Deleting the checkpoints recorded history has moved past, off the step's critical path
(``SandboxHost.deletions``): a large one at once, small ones in batches (one thread hop or one
DeleteObjects request for many steps, not one per step)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from .checkpoints import CheckpointScope, CheckpointStore
from .models import CheckpointRef

log = logging.getLogger(__name__)


#: Small superseded checkpoints are deleted in batches this often (see ``_delete_later``).
DELETE_BATCH_SECONDS = 0.05
DELETE_BATCH_MAX_BYTES = 64 * 1024


class CheckpointDeletions:
    def __init__(
        self, checkpoints: CheckpointStore, in_background: Callable[[Coroutine[Any, Any, Any]], None]
    ) -> None:
        self.checkpoints = checkpoints
        self._in_background = in_background
        #: Small checkpoints recorded history has moved past, deleted together a moment later
        #: (one thread hop or one DeleteObjects request for many steps, not one per step).
        self._doomed: list[tuple[CheckpointScope, CheckpointRef]] = []
        self._reaper: asyncio.TimerHandle | None = None

    def delete_later(self, scope: CheckpointScope, ref: CheckpointRef) -> None:
        """Delete a checkpoint off the step's critical path: a large one now, small ones in
        batches every ``DELETE_BATCH_SECONDS`` (so a run holds two large checkpoints at most,
        and for an instant a third small one)."""
        if ref.size > DELETE_BATCH_MAX_BYTES:
            self._in_background(self.delete_quietly(scope, ref))
            return
        self._doomed.append((scope, ref))
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().call_later(DELETE_BATCH_SECONDS, self.reap)

    def reap(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        doomed, self._doomed = self._doomed, []
        if doomed:
            self._in_background(self._delete_batch(doomed))

    async def _delete_batch(self, doomed: list[tuple[CheckpointScope, CheckpointRef]]) -> None:
        try:
            await self.checkpoints.delete_many(doomed)
        except Exception as err:  # leftovers are swept at retention; never fail a step for them
            log.warning("could not delete %d superseded checkpoints: %s", len(doomed), err)

    async def delete_quietly(self, scope: CheckpointScope, ref: CheckpointRef) -> None:
        try:
            await self.checkpoints.delete(scope, ref)
        except Exception as err:  # a leftover is swept at retention; never fail a step for it
            log.warning("could not delete superseded checkpoint %s: %s", ref.sha256[:12], err)
