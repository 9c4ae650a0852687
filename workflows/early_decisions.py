"""Decisions that come before their call waits (issue 43): held, then applied when it does.

A person decides what ``status`` showed waiting. ``status`` may answer from a replay of the
history that already applied the completions of a call's approval gate, while the run's next
workflow task brings the person's signal and those completions together; the SDK applies
signals and updates first, when the call does not wait yet. Before, the decision was set aside
as "not waiting" and the call then waited its whole deadline (seven days by default).

So in a run of the current generation (``workflows/versions.py``) a decision for a call that
will ask a person but does not wait yet is held, and applied when the call begins to wait (in
the same workflow task). Which decisions are held is judged only from what the history fixes,
never from whether a local step's result was taken in before the decision within the same task
(that order differs between a first execution and a replay, ``workflows/versions.py``):

* a call of a step already taken in that asks a person (``expect``), until it waits or is
  settled (a rule decided it, it timed out): held;
* any call while a step is under way (``step_began``): held, since that step may ask for it;
  when the step is taken in, those it did not ask for are judged again, and refused as before;
* anything else (a call that does not ask, or is done; a name no call has): refused at once.

A replay may take a step in earlier than the first execution did: a decision held there until
the step and refused then is refused at once on replay. Either way it is refused before the run
does anything with it: the commands are the same; only the status in between differs.

Workflow code: deterministic.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from codemode.workflows.models import CODE_APPROVAL_ID, HeldDecision, decision_target
    from codemode.workflows.versions import Versions

#: Decisions held at most (past it, a decision is judged at once).
MAX_HELD = 50


class EarlyDecisions:
    def __init__(self, versions: Versions) -> None:
        self.versions = versions
        #: (what is shown, the signal's name and payload) in the order they came.
        self.held: list[tuple[HeldDecision, str, Any]] = []
        #: Calls of steps taken in that ask a person and are not settled yet.
        self.expected: set[str] = set()
        #: A step is under way: it may ask for calls nobody has seen yet. True from the start
        #: (the first step starts at once; a decision can come in the run's first task, before
        #: ``run`` begins) until a step is taken in.
        self.stepping = True
        #: The run ends or continues as new: nothing is held any more.
        self.closed = False

    def holds(self, call_id: str | None, *, waiting: Collection[str], decided: Collection[str]) -> bool:
        """Whether a decision for ``call_id`` is held rather than judged now."""
        if not self.versions.current or self.closed or call_id is None:
            return False
        if call_id in waiting or call_id in decided:
            return False
        if not (call_id.isdigit() or call_id == CODE_APPROVAL_ID):
            return False  # no call is ever named so
        return (call_id in self.expected or self.stepping) and len(self.held) < MAX_HELD

    def hold(self, name: str, payload: Any, shown: str) -> None:
        call_id = decision_target(payload)
        assert call_id is not None
        self.held.append((HeldDecision(signal=name, call_id=call_id, payload=shown), name, payload))
        workflow.logger.info("%s for call %s held until the call waits for a decision", name, call_id)

    def shown(self) -> list[HeldDecision]:
        return [held for held, _, _ in self.held]

    def take(self, call_id: str | None = None) -> list[tuple[str, Any]]:
        """The held decisions for ``call_id`` (every one: None), no longer held: (name, payload)."""
        mine = [(name, payload) for held, name, payload in self.held if call_id is None or held.call_id == call_id]
        self.held = [h for h in self.held if call_id is not None and h[0].call_id != call_id]
        return mine

    def expect(self, call_id: str) -> None:
        """``call_id`` will ask a person (its step was taken in, or its review begins)."""
        self.expected.add(call_id)

    def settled(self, call_id: str) -> None:
        """``call_id`` asks nobody any more (decided, by a rule or a person, or timed out)."""
        self.expected.discard(call_id)

    def step_began(self) -> None:
        self.stepping = True

    def step_taken(self, asking: Iterable[str]) -> list[tuple[str, Any]]:
        """A step was taken in; ``asking``: its calls that ask a person. The held decisions no
        call can take any more, to be judged again (and refused)."""
        self.stepping = False
        self.expected.update(asking)
        stale = [(name, payload) for held, name, payload in self.held if held.call_id not in self.expected]
        self.held = [h for h in self.held if h[0].call_id in self.expected]
        return stale

    def close(self) -> list[tuple[str, Any]]:
        """No held decision can apply any more: all of them, to be listed as ignored."""
        self.closed = True
        return self.take()
