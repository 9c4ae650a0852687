"""The end of a session's cell (``step_loop.py`` ends a cell's run here): what the cell did
stays or is rolled back, and the session is parked until the next cell: its state saved (and
kept warm here), its sandbox paused, or its live process kept on this worker."""

from __future__ import annotations

import hashlib
import logging

from codemode.runtimes import CodeExecution
from codemode.runtimes.errors import SandboxError
from codemode.runtimes.session import CodeSession
from codemode.runtimes.types import CheckpointTier

from .checkpoints import CheckpointScope, session_scope
from .models import CellEffect, CellEnd, CellRef, CheckpointRef, StartInput
from .parking import cannot_pause, running_grace
from .records import ErrorInfo
from .sandbox_host import SandboxHost

log = logging.getLogger(__name__)


class CellEnds:
    def __init__(self, host: SandboxHost) -> None:
        self.host = host

    async def end_cell(self, execution: CodeExecution, cell: CellRef, error: ErrorInfo | None) -> CellEnd:
        """A cell ended. What it did stays when it completed or its code raised (notebook
        semantics); a cell stopped by a limit, or whose sandbox died, is rolled back (the
        session is as it was before it: exactly what a rebuild would give)."""
        session = execution.session
        if session is None:
            return CellEnd(effect="rolled_back")
        if not session.alive or (error is not None and error.kind != "runtime"):
            await session.close()
            return CellEnd(effect="rolled_back")
        return await self.park_session(session, cell, "kept")

    async def park_session(self, session: CodeSession, cell: CellRef, effect: CellEffect) -> CellEnd:
        """Between cells: save the session's state (and keep it warm here), pause a sandbox
        that costs compute, or keep the live process on this worker."""
        runtime = self.host.runtime(session.runtime)
        scope = session_scope(cell.scope)
        try:
            variables = await session.variables()
            blob = await session.dump()
        except SandboxError as err:
            await session.close()
            log.info("could not save the session after its cell: %s", err)
            return CellEnd(effect="rolled_back")
        if not session.alive:
            return CellEnd(effect="rolled_back")
        if blob is None:
            key = self.host.live.keep_session(session, cell.scope.session_id)
            return CellEnd(effect=effect, live=key, live_queue=self.host.session_queue, variables=variables)
        ref = await self.host.checkpoints.save(scope, blob)
        if cell.state is not None and cell.state != ref:
            self.host.deletions.delete_later(scope, cell.state)  # the session moved past it
        end = CellEnd(effect=effect, state=ref, variables=variables)
        if runtime.capabilities.checkpoint_tier is CheckpointTier.SESSION:
            why = cannot_pause(runtime) if getattr(runtime, "parks_as", "running") == "running" else None
            try:
                await runtime.suspend(blob)  # paused between cells: no compute while idle
            except SandboxError as err:
                log.warning("could not pause the session's sandbox: %s", err)
                why = f"pausing it failed: {err}"
            await session.close()  # detaches; the sandbox is its state
            if why is not None:  # it runs while idle: the session releases it after the grace period
                end.release_after, end.running_why = running_grace(runtime, why)
        else:
            self.host.live.keep_warm(warm_key(scope, ref, session.tag), session)
        return end



def session_tag(start: StartInput) -> str:
    """What a live session was opened with: limits, sandbox options, seed and clock."""
    parts = [start.limits.model_dump_json(), start.options.model_dump_json() if start.options else ""]
    parts.append(start.determinism.model_dump_json() if start.determinism else "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def warm_key(scope: CheckpointScope, ref: CheckpointRef, tag: str | None) -> str:
    return f"{scope.root}{ref.sha256}:{tag}"
