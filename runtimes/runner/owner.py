"""Who a sandbox belongs to: the execution and the step attempt that created it.

Every sandbox a provider creates carries these as labels (Docker labels, E2B metadata, Modal
tags, Blaxel labels), so the sweep (``activities/sandbox_sweep.py``) can ask Temporal whether
that execution is still open and whether its checkpoint names that sandbox, and destroy the
rest at once. The step that runs a sandbox's code sets the owner for the duration of the step
(``owned_by``); the runtime reads it when it creates a sandbox (``owner_labels``). Pure
asyncio: a context variable, so concurrent steps on one worker never mix their owners.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "CLUSTER_LABEL",
    "EXECUTION_LABEL",
    "NAMESPACE_LABEL",
    "SESSION_LABEL",
    "STEP_LABEL",
    "SandboxOwner",
    "owned_by",
    "owner_labels",
]

#: The execution (workflow id) whose step created the sandbox.
EXECUTION_LABEL = "codemode.execution"
#: The step attempt that created it: ``<activity id>#<attempt>`` (``call-3#1`` for a tool's
#: activity that ran the step after its call).
STEP_LABEL = "codemode.step"
#: The Temporal namespace of that execution (a sweep judges only its own namespace's).
NAMESPACE_LABEL = "codemode.namespace"
#: A session's cell: the session (workflow id) that keeps the sandbox between cells.
SESSION_LABEL = "codemode.session"
#: The Temporal cluster's id: a sweep judges only its own cluster's sandboxes (two dev
#: servers on one machine share a Docker engine, and both call their namespace "default").
CLUSTER_LABEL = "codemode.cluster"


@dataclass(frozen=True)
class SandboxOwner:
    execution_id: str
    step: str = ""
    namespace: str = ""
    session_id: str = ""
    cluster: str = ""

    def labels(self) -> dict[str, str]:
        found = {
            EXECUTION_LABEL: self.execution_id,
            STEP_LABEL: self.step,
            NAMESPACE_LABEL: self.namespace,
            SESSION_LABEL: self.session_id,
            CLUSTER_LABEL: self.cluster,
        }
        return {k: v for k, v in found.items() if v}


_owner: contextvars.ContextVar[SandboxOwner | None] = contextvars.ContextVar("codemode_sandbox_owner", default=None)


@contextlib.contextmanager
def owned_by(owner: SandboxOwner | None) -> Iterator[None]:
    """Sandboxes created inside this block carry ``owner``'s labels."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def owner_labels() -> dict[str, str]:
    """The labels of the step running now (empty outside a step: a bare runtime)."""
    owner = _owner.get()
    return owner.labels() if owner is not None else {}
