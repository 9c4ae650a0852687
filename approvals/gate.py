"""What the worker tells the workflow about one call that needs a decision: whether an
approvers file is in force, who may decide the call and how many, the keys that may sign, and
what the policy rules say. An activity's result, so the history records it once and every
replay (and ``codemode history --verify``) checks decisions against the same keys."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

Verdict = Literal["ask", "allow", "deny"]
#: Who may decide when a rule lists this: every person in the file.
EVERYONE = "*"


class GateInput(BaseModel):
    execution_id: str
    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)


class ApprovalGate(BaseModel):
    """The approvers file as it applies to one call, at the time the call asked."""

    #: False: no approvers file; decisions are taken as before (unsigned, any name).
    configured: bool = False
    #: The execution and call it answers for (the history keeps them with the keys: a
    #: decision counts only when signed for exactly these).
    execution_id: str = ""
    call_id: str = ""
    #: SHA-256 of the file's bytes, and where the worker read it.
    file_sha256: str = ""
    file: str = ""
    tool: str = ""
    #: The rule that says who decides: ``tools.send_email``, ``defaults.mcp``, ``defaults``.
    rule: str = ""
    #: The people allowed to decide (groups resolved), or ``["*"]``.
    approvers: list[str] = Field(default_factory=list)
    #: As the rule lists them (``group:finance``), for messages.
    approvers_listed: list[str] = Field(default_factory=list)
    required: int = 1
    four_eyes: bool = False
    #: Every key that may sign now -> its holder.
    keys: dict[str, str] = Field(default_factory=dict)
    #: Keys kept only to verify older decisions -> their holder.
    retired_keys: dict[str, str] = Field(default_factory=dict)
    #: Services (e.g. the inbox) -> the people they may sign for (resolved; ``["*"]``: anyone).
    signs_for: dict[str, list[str]] = Field(default_factory=dict)
    #: Whether this worker tells people that calls wait (a notify config with a channel): a run
    #: of the current generation starts its notify workflows only then, so one without
    #: channels adds no activity per event (``workflows/approval_notices.py``).
    notify: bool = False
    #: What the policy rules decided: ``ask`` a person, or ``allow``/``deny`` without one.
    verdict: Verdict = "ask"
    #: The policy rule that decided (``policy.own-domain-mail``), and its reason.
    policy_rule: str = ""
    policy_reason: str = ""

    def may_decide(self, person: str) -> bool:
        return EVERYONE in self.approvers or person in self.approvers
