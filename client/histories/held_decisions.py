"""The audit's view of decisions that came before their call waited (issue 43).

A run of the current generation (its history has the ``generation-43`` patch marker at its start,
``workflows/versions.py``) holds a decision for a call that will ask a person but does not wait
yet, or for any call while a step is under way, and applies it when the call begins to wait:
after its approval gate activity completes (``workflows/early_decisions.py``). The audit does the
same with the history's events: such a signal or accepted ``decide`` Update is kept and fed again
when the call's gate completes, or when the step is taken in and did not ask for the call (then
it is refused, as the workflow refused it). So ``codemode history`` and ``--verify`` judge it with
the state the workflow judged it with. Runs recorded before the generation are read as ever."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable

from temporalio.api.history.v1 import HistoryEvent

from codemode.activities.models import CallRequest
from codemode.workflows.early_decisions import MAX_HELD
from codemode.workflows.models import CODE_APPROVAL_ID, IgnoredSignal
from codemode.workflows.versions import GENERATION_PATCH, GENERATIONS

PATCH_MARKER = "core_patch"
#: Call states after which a call runs nothing more.
FINAL = frozenset({"ok", "error", "denied", "timed_out", "cancelled"})


def patch_id(event: HistoryEvent) -> str | None:
    """The change a ``core_patch`` marker records (its details are Core's plain JSON)."""
    attrs = event.marker_recorded_event_attributes
    if attrs.marker_name != PATCH_MARKER or "patch-data" not in attrs.details:
        return None
    payloads = attrs.details["patch-data"].payloads
    try:
        return str(json.loads(payloads[0].data)["id"]) if payloads else None
    except (ValueError, KeyError, TypeError):
        return None


class HeldDecisions:
    """Decision events held as the workflow held them (only in runs of the current generation).

    ``status_of(call_id)``: the audit's state of a call (``CallAudit.status``), to tell whether a
    step is under way: the workflow starts the next step as soon as every call of the last one
    is done (or when the only one left is a tool activity that runs the step after it)."""

    def __init__(self, status_of: Callable[[str], str | None]) -> None:
        self.generation = False
        self._status_of = status_of
        #: Calls whose wait began (their gate completed); call ids run on across runs.
        self.waiting: set[str] = set()
        #: Calls of steps taken in that ask a person and are not settled yet.
        self.expected: set[str] = set()
        self.held: list[tuple[str, HistoryEvent]] = []
        #: The last step's calls, and those of them whose tool activity runs the next step.
        self.step_calls: list[str] = []
        self.fused: set[str] = set()

    def reviewing_code(self, review: bool) -> None:
        """The run starts with the code's review."""
        if review:
            self.expected.add(CODE_APPROVAL_ID)

    def saw_marker(self, event: HistoryEvent) -> None:
        marker = patch_id(event)
        if marker in GENERATIONS and GENERATIONS.index(marker) >= GENERATIONS.index(GENERATION_PATCH):
            self.generation = True

    def stepping(self) -> bool:
        left = [c for c in self.step_calls if self._status_of(c) not in FINAL]
        return all(c in self.fused for c in left)

    def holds(self, call_id: str | None, decided: bool) -> bool:
        """Whether the workflow held a decision for ``call_id`` (see ``EarlyDecisions.holds``)."""
        if not self.generation or call_id is None or decided or call_id in self.waiting:
            return False
        if not (call_id.isdigit() or call_id == CODE_APPROVAL_ID) or len(self.held) >= MAX_HELD:
            return False
        return call_id in self.expected or self.stepping()

    def keep(self, call_id: str | None, event: HistoryEvent, *, decided: bool) -> bool:
        """Hold ``event`` (a decision for ``call_id``) if the workflow held it: True if so."""
        if not self.holds(call_id, decided):
            return False
        assert call_id is not None
        self.held.append((call_id, event))
        return True

    def step_taken(self, calls: Iterable[CallRequest]) -> list[HistoryEvent]:
        """A step was taken in: the held events no call of it can take, to be judged again."""
        calls = list(calls)
        self.step_calls, self.fused = [c.call_id for c in calls], set()
        self.expected.update(c.call_id for c in calls if c.requires_approval)
        stale = [e for c, e in self.held if c not in self.expected]
        self.held = [(c, e) for c, e in self.held if c in self.expected]
        return stale

    def began_waiting(self, call_id: str) -> list[HistoryEvent]:
        """The call's wait began: its held decision events, in the order they came."""
        self.waiting.add(call_id)
        return [e for _, e in self.take(call_id)]

    def settled(self, call_id: str) -> None:
        """The call asks nobody any more."""
        self.expected.discard(call_id)

    def dropped(self, call_id: str | None, why: str) -> list[IgnoredSignal]:
        """The held decisions of ``call_id`` (every call: None) that never applied, as ignored."""
        return [
            IgnoredSignal(
                signal=e.workflow_execution_signaled_event_attributes.signal_name or "decide",
                payload=f'{{"call_id":"{c}"}}',
                reason=why,
            )
            for c, e in self.take(call_id)
        ]

    def take(self, call_id: str | None) -> list[tuple[str, HistoryEvent]]:
        """The held events of ``call_id`` (of every call: None), no longer held."""
        mine = [(c, e) for c, e in self.held if call_id is None or c == call_id]
        self.held = [(c, e) for c, e in self.held if call_id is not None and c != call_id]
        return mine
