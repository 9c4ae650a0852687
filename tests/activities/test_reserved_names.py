"""A tool may not take the name of one of code mode's own activities: it would collide with the
step's activity type when the worker starts. The reserved names come from the one module that
names every activity, and each of them is an activity a worker really registers."""

from __future__ import annotations

import pytest

from codemode.activities import names
from codemode.activities.approval_gate import ApproverActivities
from codemode.activities.notify import NotifyActivities
from codemode.activities.retention import RetentionActivities
from codemode.activities.sandbox_steps import SandboxActivities
from codemode.activities.sandbox_sweep import SandboxSweepActivities
from codemode.activities.tools import ToolRegistry, tool


@pytest.mark.parametrize("name", sorted(names.RESERVED))
def test_a_tool_cannot_take_an_activity_name(name: str) -> None:
    @tool(name=name)
    def collide() -> None: ...

    with pytest.raises(ValueError, match=f"tool name '{name}' is reserved"):
        ToolRegistry([collide])


def test_the_reserved_names_are_the_registered_activities() -> None:
    """Every activity our workers register besides the tools is in ``names.RESERVED``."""
    from temporalio import activity

    registered = {
        activity._Definition.must_from_callable(fn).name
        for owner in (
            *SandboxActivities.__mro__,
            RetentionActivities,
            SandboxSweepActivities,
            ApproverActivities,
            NotifyActivities,
        )
        for fn in owner.__dict__.values()
        if callable(fn) and activity._Definition.from_callable(fn) is not None
    }
    assert {n for n in registered if n.isidentifier()} == set(names.RESERVED)
    assert registered - set(names.RESERVED) <= names.NOTIFY_STEPS
