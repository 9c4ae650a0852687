"""The name of every activity code mode registers besides the tools, in one place.

The names are the activity types in every recorded history, so they never change (the
committed histories in ``tests/*/histories`` replay against them). A tool may not take one:
``RESERVED`` is what the tool registry refuses.
"""

from __future__ import annotations

#: Sandbox steps of an execution (``activities/sandbox_steps.py``).
SANDBOX_START = "sandbox_start"
SANDBOX_RESUME = "sandbox_resume"
SANDBOX_RELEASE = "sandbox_release"
#: Pause (or say it cannot) the sandbox of a run about to wait for a person.
SANDBOX_PARK = "sandbox_park"
SANDBOX_SAVE_STATE = "sandbox_save_state"
SANDBOX_LOAD_STATE = "sandbox_load_state"
#: Steps of a session's workflow (``activities/sandbox_steps.py``).
SESSION_SAVE_RECIPE = "session_save_recipe"
SESSION_RELEASE = "session_release"
#: Who may decide a call, from the worker's approvers file (``activities/approval_gate.py``).
APPROVAL_GATE = "approval_gate"
#: The activity that starts an approval event's notify workflow (``activities/notify.py``; a local
#: activity in runs recorded before issue 43).
NOTIFY_START = "codemode.notify.start"
#: The notify workflow's own activities.
NOTIFY_STEPS = frozenset(
    {NOTIFY_START, "codemode.notify.plan", "codemode.notify.deliver", "codemode.notify.still_pending"}
)
#: The retention sweep of the object store (``activities/retention.py``).
STORAGE_SWEEP = "storage_sweep"
#: The sweep of sandboxes no open execution names (``activities/sandbox_sweep.py``).
SANDBOX_SWEEP = "sandbox_sweep"

SANDBOX_STEPS = frozenset(
    {SANDBOX_START, SANDBOX_RESUME, SANDBOX_RELEASE, SANDBOX_PARK, SANDBOX_SAVE_STATE, SANDBOX_LOAD_STATE}
)
SESSION_STEPS = frozenset({SESSION_SAVE_RECIPE, SESSION_RELEASE})
#: Every activity name that is not a tool's and that a tool could take (the notify
#: workflow's dotted names are no Python identifier: no tool can).
RESERVED = SANDBOX_STEPS | SESSION_STEPS | {STORAGE_SWEEP, SANDBOX_SWEEP, APPROVAL_GATE}
#: Activity types in an execution's history that are not tool calls (a run of the current
#: generation starts its notify workflows with an activity: ``workflows/approval_notices.py``).
NOT_TOOLS = RESERVED | NOTIFY_STEPS
