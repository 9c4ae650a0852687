"""What the worker tells the workflow about one call that needs a decision: whether an
approvers file is in force, who may decide the call and how many, the keys that may sign, and
what the policy rules say. An activity's result, so the history records it once and every
replay (and ``codemode history --verify``) checks decisions against the same keys."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from codemode.approvals.signing import StartSignature, verify_start

Verdict = Literal["ask", "allow", "deny"]
#: A tool's docstring is shown to people up to this many characters.
TOOL_DOC_LIMIT = 600
#: Who may decide when a rule lists this: every person in the file (never a service).
EVERYONE = "*"


class RecheckedOffer(BaseModel):
    """A decision that passed the checks when it came, judged again against the file as it is
    when the run reads it again (``GateInput.recheck``): revocation applies to waiting calls.
    Carried in the activity's input, so the audit judges exactly what the workflow judged."""

    kind: Literal["approve", "deny", "answer"]
    signature: dict[str, Any] | None = None
    edited: dict[str, Any] | None = None
    answer: Any = None
    answered: bool = False
    comment: str | None = None
    door: str | None = None
    #: "Deny and roll back" (issue 47): a signature covers it.
    rollback: bool = False
    by: str = ""
    #: ``signal`` (its name ``approve``/``deny``) or ``update`` (the ``decide`` Update's id).
    source: str = "signal"
    update_id: str | None = None


class GateInput(BaseModel):
    execution_id: str
    call_id: str
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    #: (Runs of generation-45.) The approvers file's SHA-256 the run pinned when it first saw
    #: one: a worker without a file, or with another (that does not supersede it), does not
    #: answer for this run (it fails the attempt, so another worker retries).
    pinned: str | None = None
    #: Who the run says started it, the start's signature, and the code's SHA-256: the gate
    #: authenticates the starter (``ApprovalGate.starter``).
    started_by: str | None = None
    start_signature: StartSignature | None = None
    code_sha256: str | None = None
    #: Decisions judged again now (None: the call asks for the first time).
    recheck: list[RecheckedOffer] | None = None
    #: Runs of generation-45: the gate says what it judged with (``strict`` rules).
    strict: bool = False


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
    #: Whether a decision through a signed link (door ``link``) may count (strict runs).
    links: bool = True
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
    #: (Issue 46.) Where people decide: the approvals inbox's page of this call (the worker's
    #: notify config's ``inbox_url``; ``codemode dev`` supplies its own inbox), "" when none.
    #: The run shows it in its memo, its details and its timer, and the status query has it.
    inbox_url: str = ""
    #: The tool's docstring (cut to ``TOOL_DOC_LIMIT``): what the call does, for the person.
    tool_doc: str = ""
    #: What the policy rules decided: ``ask`` a person, or ``allow``/``deny`` without one.
    verdict: Verdict = "ask"
    #: The policy rule that decided (``policy.own-domain-mail``), and its reason.
    policy_rule: str = ""
    policy_reason: str = ""
    #: (Since issue 45.) The people ``"*"`` means: those listed in ``[people]`` who are not a
    #: service (a service signs for others, and never decides itself).
    people: list[str] = Field(default_factory=list)
    #: Every name a person is known by (their aliases and their name, casefolded) -> the person.
    aliases: dict[str, str] = Field(default_factory=dict)
    #: Who started the run, as the gate authenticated them (a start signed by a listed key, or
    #: by a service for a person it may sign for), and how; None: not authenticated.
    starter: str | None = None
    starter_how: str = ""
    #: Who the run says started it (resolved), when that is not authenticated.
    starter_claimed: str | None = None
    #: When the worker read the file for this answer (a signature dated later than this, beyond
    #: the clock skew, is refused), and the hashes of files this one replaces.
    checked_at: datetime | None = None
    supersedes: list[str] = Field(default_factory=list)
    #: A policy condition that could not be judged (the rule then decided the safe way).
    policy_unjudged: str = ""
    #: The validated arguments could not be had (the rules judged nothing but deny and ask).
    unvalidated: str = ""

    def resolve(self, name: str | None) -> str | None:
        """The person ``name`` means (a name, or an alias: an email, the proxy's identity)."""
        if name is None:
            return None
        return self.aliases.get(name.casefold(), name)

    def is_service(self, name: str) -> bool:
        """A signer with ``signs_for``: it signs for others and decides nothing itself."""
        return name in self.signs_for

    def may_decide(self, person: str, *, strict: bool = False) -> bool:
        """Whether ``person`` may decide this call. ``strict`` (runs of generation-45): the
        person resolved; ``"*"`` means the listed people only; a service never."""
        if not strict:
            return EVERYONE in self.approvers or person in self.approvers
        person = self.resolve(person) or ""
        if self.is_service(person):
            return False
        if EVERYONE in self.approvers:
            return person in self.people
        return person in self.approvers

    def may_sign_for(self, service: str, person: str, *, strict: bool = False) -> bool:
        allowed = self.signs_for.get(service, [])
        if not strict:
            return EVERYONE in allowed or person in allowed
        person = self.resolve(person) or ""
        if self.is_service(person):
            return False
        return person in self.people if EVERYONE in allowed else person in allowed

    def authenticate_start(
        self, claimed: str | None, signature: StartSignature | None, execution_id: str, code_sha256: str | None
    ) -> tuple[str | None, str]:
        """Who started the run, authenticated by this gate's keys: ``(person, how)`` when
        ``signature`` is a start signed by a key listed now (a person's own, or a service's for
        a person it may sign for) over this execution and code; ``(None, why not)`` otherwise.
        The gate activity asks it, and ``--verify`` asks it again from the history."""
        if signature is None:
            return None, "the start is not signed"
        holder = self.keys.get(signature.key)
        if holder is None or holder != signature.signer:
            return None, f"the start is signed with a key the approvers file does not list for {signature.signer}"
        if not verify_start(signature):
            return None, "the start's signature does not verify"
        if signature.execution_id != execution_id or (code_sha256 and signature.code_sha256 != code_sha256):
            return None, "the start's signature is for another execution or other code"
        if signature.on_behalf_of is None:
            if self.is_service(holder):
                return None, f"{holder} signs for others: a start it signs names the person"
            person, how = holder, f"signed by {holder}'s key"
        else:
            person = self.aliases.get(signature.on_behalf_of.casefold()) or ""
            if not person or not self.may_sign_for(holder, person, strict=True):
                return None, f"{holder} may not sign for {signature.on_behalf_of}"
            how = f"signed by {holder} for {person}"
        if claimed is not None and self.aliases.get(claimed.casefold(), claimed) != person:
            return None, f"the start names {claimed}, its signature {person}"
        return person, how

    def same_file(self, pinned: str | None) -> bool:
        """Whether this answer comes from the file a run pinned (or one that supersedes it)."""
        return pinned is None or (self.configured and (self.file_sha256 == pinned or pinned in self.supersedes))


def pin_problem(pinned: str | None, gate: ApprovalGate, *, recheck: bool) -> str | None:
    """Why a run that pinned the approvers file ``pinned`` does not take ``gate`` (None: it
    does): a worker without the file answered, or (a call's first gate) one with another file
    that does not supersede it. A recheck takes any file: the run counts a decision only when
    the call's gate allows it too. Shared by the workflow and the audit."""
    if pinned is None:
        return None
    if not gate.configured:
        return (
            f"a worker without the approvers file answered, and this run checks its decisions against the "
            f"file it pinned (sha256 {pinned[:16]}…): refused"
        )
    if not recheck and not gate.same_file(pinned):
        return (
            f"a worker's approvers file (sha256 {gate.file_sha256[:16]}…) is not the one this run pinned "
            f"(sha256 {pinned[:16]}…) and does not supersede it: refused"
        )
    return None
