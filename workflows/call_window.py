"""How many calls of one gathered batch ``CodeExecutionWorkflow`` runs (and records) at once.

Workflow code: deterministic; the patch keeps histories recorded with the older window
replaying (``window64-*.json`` and ``window40-*.json`` under ``tests/workflows/histories``).
"""

from __future__ import annotations

from codemode.workflows.versions import Versions

#: Calls of one gathered batch run (and are recorded) this many at a time, so even a batch
#: of thousands leaves room to continue as new between windows. Each call that completes
#: while a workflow task is in flight adds two buffered events (started, completed); past
#: 100 (the server's ``history.maximumBufferedEventsBatch``) the server force-fails that task
#: (``FORCE_CLOSE_COMMAND``) and the worker replays the run from its history. 40 calls stay
#: below that, with room for signals.
CALL_WINDOW = 40
#: The window before that (a batch of 41 to 64 calls was one window): what histories
#: recorded without the ``CALL_WINDOW_PATCH`` marker replay with.
OLD_CALL_WINDOW = 64
CALL_WINDOW_PATCH = "call-window-40"


def call_window(remaining: int, versions: Versions) -> int:
    """How many of the remaining calls to run now. A run recorded before the current generation
    asks for the patch (a marker and a search-attribute update, once per run) only for a batch
    the two windows split differently."""
    if remaining <= CALL_WINDOW:
        return remaining
    return CALL_WINDOW if versions.has(CALL_WINDOW_PATCH) else OLD_CALL_WINDOW
