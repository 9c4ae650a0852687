"""Letting go of a session's state (workflow code of ``CodeSessionWorkflow``): on a restart,
when it closes, and while it is idle between cells on a provider whose sandbox keeps running
(Modal cannot pause one and keep its processes).

A session's state there is its running sandbox. Idle past the park grace period
(``CODEMODE_PARK_RELEASE_AFTER``, which the cell's end reports as ``CellEnd.release_after``),
the session releases it (the sandbox is destroyed, the state deleted) and keeps only its
recipe; its next cell rebuilds the session in a fresh sandbox by replaying the earlier cells
from their stored tool results (exactly: the session's seed and clock), as it does whenever
its sandbox is gone. Patched (``IDLE_RELEASE_PATCH``): a session recorded before this keeps
its sandbox until its next cell, its close, or the provider's own timeout.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.models import CheckpointRef, SessionReleaseInput, SessionScope
    from codemode.workflows.step_activities import on_own_queue
    from codemode.workflows.summary import in_words
    from codemode.workflows.versions import Versions

#: The patch marker of releasing an idle session's running sandbox after the grace period.
IDLE_RELEASE_PATCH = "session-release-idle-sandbox"
#: How long a release waits for the worker that holds a live session.
LIVE_RELEASE_SCHEDULE_TO_START = timedelta(seconds=10)
RELEASE_RETRY = RetryPolicy(maximum_attempts=5, initial_interval=timedelta(seconds=1))


def _scope() -> SessionScope:
    info = workflow.info()
    return SessionScope(session_id=info.workflow_id, first_run_id=info.first_execution_run_id)


async def release_state(
    runtime: str,
    live: tuple[str, str | None] | None,
    state: CheckpointRef | None,
    *,
    everything: bool,
    summary: str | None = None,
) -> None:
    """Let go of the session's state (a restart, an idle sandbox), or of all it stored (it
    closes): the live process on its worker, the sandbox the state names, the stored state."""
    scope = _scope()
    if live is not None and live[1]:
        try:
            await on_own_queue(
                names.SESSION_RELEASE,
                SessionReleaseInput(scope=scope, runtime=runtime, live=live[0]),
                live[1],
                schedule_to_start=LIVE_RELEASE_SCHEDULE_TO_START,
                start_to_close=timedelta(seconds=30),
                summary="stop the session's live process",
            )
        except ActivityError as err:  # its worker is gone: the process went with it
            workflow.logger.info("could not reach the session's live process: %s", err.cause or err)
    if state is None and not everything:
        return
    try:
        await workflow.execute_activity(
            names.SESSION_RELEASE,
            SessionReleaseInput(scope=scope, runtime=runtime, state=state, everything=everything),
            start_to_close_timeout=timedelta(seconds=120),
            retry_policy=RELEASE_RETRY,
            summary=summary
            or ("delete the session's state" if everything else "let go of the session's state (restart)"),
        )
    except ActivityError as err:  # leftovers are the retention sweep's
        workflow.logger.warning("could not release the session's state: %s", err.cause or err)


async def release_when_idle(
    runtime: str,
    state: CheckpointRef,
    running: tuple[float, str],
    *,
    last_active: datetime,
    idle_timeout: timedelta,
    busy: Callable[[], bool],
    versions: Versions,
) -> str | None:
    """Wait until the session has been idle for the grace period of ``running`` (seconds,
    why its sandbox runs) and release ``state``; None if ``busy`` (a cell came, it closes)
    first, else why the next cell replays the session's cells."""
    grace = timedelta(seconds=running[0])
    if grace >= idle_timeout or not versions.has(IDLE_RELEASE_PATCH):
        return None  # (the session closes first, which frees it)
    try:
        await workflow.wait_condition(
            busy,
            timeout=max(last_active + grace - workflow.now(), timedelta(seconds=1)),
            timeout_summary="release the idle session's running sandbox",
        )
        return None
    except TimeoutError:
        pass
    after = in_words(running[0])
    await release_state(
        runtime,
        None,
        state,
        everything=False,
        summary=f"release the idle session's sandbox after {after}: {running[1]}",
    )
    return f"its sandbox was released after {after} idle ({running[1]})"
