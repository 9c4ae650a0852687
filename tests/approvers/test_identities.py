"""One identity per person, authenticated starters, and what a signature covers (issue 45), at
the tally: the one check the workflow, the audit and ``--verify`` apply to every decision.

Each test is a finding of issue 45 as reported on main 85705d4, and fails if it comes back:
four eyes compared free text (a starter setting ``CODEMODE_USER`` to another name approved
their own run; one person's login, email and inbox identity were three people), ``"*"`` took any
name, a service key counted as an approver (one person's own key plus the inbox signing for that
same person met ``required = 2``), a signature covered neither the comment nor the door nor the
run, a ``signed_at`` in the future was accepted, and a key removed from the file still counted for
calls already waiting."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from codemode.approvals.approvers_file import ApproversFile, ApproversFileError
from codemode.approvals.gate import ApprovalGate
from codemode.approvals.signing import code_sha256, sign_start
from codemode.approvals.tally import CallTally, Offer
from codemode.workflows.models import PendingApproval

from .helpers import Person

RUN = "run-1"
CODE = "transfer('bob', 12.5)"


def people() -> dict[str, Person]:
    return {name: Person(name) for name in ("ana", "bob", "cy", "inbox")}


def file_of(p: dict[str, Person], rule: str = "required = 2\nfour_eyes = true", extra: str = "") -> ApproversFile:
    text = (
        f'[people.ana]\nkeys = ["{p["ana"].public}"]\ngroups = ["finance"]\naliases = ["ana@ourco.com", "asmith"]\n'
        f'[people.bob]\nkeys = ["{p["bob"].public}"]\ngroups = ["finance"]\n'
        f'[people.cy]\nkeys = ["{p["cy"].public}"]\ngroups = ["finance"]\naliases = ["cy@ourco.com"]\n'
        f'[people.inbox]\nkeys = ["{p["inbox"].public}"]\nsigns_for = ["*"]\ngroups = ["finance"]\n'
        f'[tools.transfer]\napprovers = ["group:finance"]\n{rule}\n' + extra
    )
    return ApproversFile.parse(text.encode(), "approvers.toml")


def tally_of(gate: ApprovalGate, *, strict: bool = True, starter: str | None = None) -> CallTally:
    gate.execution_id, gate.call_id = "x", "1"
    return CallTally(
        "x", "1", ["bob", 12.5], {}, gate, asked_at=datetime.now(UTC), starter=starter, strict=strict, run_id=RUN
    )


CALL = PendingApproval(call_id="1", tool="transfer", args=["bob", 12.5], run_id=RUN)


def offer(person: Person, kind: str = "approve", **kw) -> Offer:
    comment, door = kw.pop("comment", None), kw.pop("door", "cli")
    sig = person.sign("x", CALL, kind, comment=comment, door=door, **kw)
    return Offer(kind, sig, comment=comment, door=door)  # type: ignore[arg-type]


def count(tally: CallTally, o: Offer) -> list | None:
    assert tally.refusal(o, now=datetime.now(UTC)) is None, tally.refusal(o, now=datetime.now(UTC))
    return tally.add(o)


def test_aliases_are_one_person_across_the_cli_the_inbox_and_the_proxy() -> None:
    p = people()
    gate = file_of(p, "required = 2").gate("transfer", {})
    tally = tally_of(gate)
    assert count(tally, offer(p["ana"])) is None  # ana's own key (the CLI): 1 of 2
    as_proxy = offer(p["inbox"], on_behalf_of="Ana@OurCo.com", door="inbox")  # the proxy's identity
    assert tally.refusal(as_proxy) == "ana already decided call 1: it needs 2 distinct approvers"
    login = offer(p["inbox"], on_behalf_of="asmith", door="inbox")  # her login, through the inbox
    assert "ana already decided" in (tally.refusal(login) or "")
    assert count(tally, offer(p["inbox"], on_behalf_of="bob", door="inbox")) is not None  # a second person decides


def test_a_service_never_counts_and_star_means_the_listed_people() -> None:
    p = people()
    gate = file_of(p, "required = 2").gate("transfer", {})
    tally = tally_of(gate)
    own = offer(p["inbox"], door="inbox")  # the service's own decision
    assert tally.refusal(own) == "inbox signs for others (a service): its own decision counts for nobody"
    assert "may not sign for mallory" in (tally.refusal(offer(p["inbox"], on_behalf_of="mallory", door="inbox")) or "")
    assert "signs for nobody but themself" in (tally.refusal(offer(p["bob"], on_behalf_of="ana")) or "")
    assert gate.approvers == ["ana", "bob", "cy"]  # group:finance, the service left out
    star = file_of(p, "required = 1").gate("other_tool", {})  # no rule of its own: "*"
    assert star.may_decide("ana@ourco.com", strict=True) and not star.may_decide("mallory", strict=True)
    assert not star.may_decide("inbox", strict=True)
    # ...and one person's own key plus the service signing for them is one approval, not two.
    assert count(tally, offer(p["cy"])) is None
    assert "cy already decided" in (tally.refusal(offer(p["inbox"], on_behalf_of="cy@ourco.com", door="inbox")) or "")


def test_a_file_that_confuses_people_is_refused() -> None:
    p = people()
    with pytest.raises(ApproversFileError, match="names both ana and bob"):
        ApproversFile.parse(
            f'[people.ana]\naliases = ["x@ourco.com"]\n[people.bob]\naliases = ["X@OurCo.com"]\n'.encode(), "a.toml"
        )
    with pytest.raises(ApproversFileError, match="a service is never an approver"):
        ApproversFile.parse(
            f'[people.inbox]\nkeys = ["{p["inbox"].public}"]\nsigns_for = ["*"]\n[tools.x]\napprovers = ["inbox"]\n'.encode()
        )


def test_four_eyes_trusts_only_an_authenticated_starter() -> None:
    """A start that is not signed names nobody four eyes trusts: cy sets CODEMODE_USER=ana and
    approves their own run. Before, cy's approval decided it; now it counts as one of two
    (whoever started can be at most one of them), and the name claimed is refused."""
    p = people()
    gate = file_of(p, "four_eyes = true").gate("transfer", {})
    gate.starter_claimed = "ana"  # what the gate said: claimed, not authenticated
    tally = tally_of(gate)
    assert tally.needed() == 2
    assert "this run says ana started it" in (tally.refusal(offer(p["ana"])) or "")
    assert count(tally, offer(p["cy"])) is None  # the liar counts once, decides nothing
    assert count(tally, offer(p["bob"])) is not None
    # A start signed with cy's key: cy is the starter, for sure, and one other approver decides.
    start = sign_start(p["cy"].key, signer="cy", execution_id="x", code=CODE)
    person, how = gate.authenticate_start("ana", start, "x", code_sha256(CODE))
    assert person is None and "names ana" in how  # claims ana, signed by cy: not believed
    person, how = gate.authenticate_start("cy", start, "x", code_sha256(CODE))
    assert (person, how) == ("cy", "signed by cy's key")
    assert gate.authenticate_start("cy", start, "other-exec", code_sha256(CODE))[0] is None
    assert gate.authenticate_start("cy", start, "x", code_sha256("other code"))[0] is None
    by_front = sign_start(p["inbox"].key, signer="inbox", execution_id="x", code=CODE, on_behalf_of="cy@ourco.com")
    assert gate.authenticate_start(None, by_front, "x", code_sha256(CODE))[0] == "cy"
    signed = file_of(p, "four_eyes = true").gate("transfer", {})
    signed.starter = "cy"
    tally = tally_of(signed)
    assert tally.needed() == 1
    assert "cy started this run" in (tally.refusal(offer(p["cy"])) or "")
    assert "cy started this run" in (tally.refusal(offer(p["inbox"], on_behalf_of="cy@ourco.com", door="inbox")) or "")
    assert count(tally, offer(p["ana"])) is not None


def test_a_signature_covers_the_comment_the_door_and_the_run_and_is_not_from_the_future() -> None:
    p = people()
    tally = tally_of(file_of(p, "required = 1").gate("transfer", {}))
    sig = p["ana"].sign("x", CALL, "deny", comment="wrong payee", door="cli")
    good = Offer("deny", sig, comment="wrong payee", door="cli")
    assert tally.refusal(good, now=datetime.now(UTC)) is None
    assert tally.refusal(Offer("deny", sig, comment="approved, go ahead", door="cli")) == (
        "signed over another comment than the one this decision carries"
    )
    assert tally.refusal(Offer("deny", sig, comment="wrong payee", door="link")) == (
        "signed for the door cli, sent through link"
    )
    other_run = p["ana"].sign("x", CALL, "deny", comment="wrong payee", door="cli", run_id="run-0")
    assert "signed for run run-0" in (tally.refusal(Offer("deny", other_run, comment="wrong payee", door="cli")) or "")
    future = p["ana"].sign("x", CALL, "approve", door="cli", signed_at=datetime.now(UTC) + timedelta(hours=1))
    assert "in the future" in (tally.refusal(Offer("approve", future, door="cli"), now=datetime.now(UTC)) or "")
    skew = p["ana"].sign("x", CALL, "approve", door="cli", signed_at=datetime.now(UTC) + timedelta(minutes=1))
    assert tally.refusal(Offer("approve", skew, door="cli"), now=datetime.now(UTC)) is None
    v1 = sig.model_copy(update={"v": 1})
    assert "older door" in (tally.refusal(Offer("deny", v1, comment="wrong payee", door="cli")) or "")


def test_a_key_removed_while_a_call_waits_no_longer_counts() -> None:
    p = people()
    asked = file_of(p, "required = 2").gate("transfer", {})
    tally = tally_of(asked)
    assert count(tally, offer(p["ana"])) is None
    # The file now: ana's key retired (a leaked key), while the call waits.
    now = ApproversFile.parse(
        (
            f'[people.ana]\nretired_keys = ["{p["ana"].public}"]\ngroups = ["finance"]\n'
            f'[people.bob]\nkeys = ["{p["bob"].public}"]\ngroups = ["finance"]\n'
            f'[people.cy]\nkeys = ["{p["cy"].public}"]\ngroups = ["finance"]\n'
            '[tools.transfer]\napprovers = ["group:finance"]\nrequired = 2\n'
        ).encode(),
        "approvers.toml",
    ).gate("transfer", {})
    tally.fresh = now
    (revoked,) = tally.revoked()
    assert revoked[0].signer == "ana" and "no longer current" in revoked[1]
    assert tally.approvers() == []
    assert "retired key of ana" in (tally.refusal(offer(p["ana"])) or "")
    assert count(tally, offer(p["bob"])) is None  # 1 of 2 again: ana's no longer counts
    assert count(tally, offer(p["cy"])) is not None


def test_runs_recorded_before_keep_their_rules() -> None:
    """A run of generation-43 replays as it was recorded: free-text starter, "*" any name, no
    recheck (the tally is not strict there)."""
    p = people()
    gate = file_of(p, "four_eyes = true").gate("transfer", {})
    old = tally_of(gate, strict=False, starter="ana")
    v1 = p["cy"].sign("x", CALL, "approve").model_copy()
    assert old.refusal(Offer("approve", v1)) is None and old.needed() == 1
    assert "ana started this run" in (old.refusal(offer(p["ana"])) or "")


def test_a_tool_may_refuse_decisions_through_links() -> None:
    """``links = false`` on a tool's rule: a decision signed for the door ``link`` (the inbox's
    signed links) does not count, whoever signed it; the inbox's own pages still do."""
    p = people()
    tally = tally_of(file_of(p, "required = 1\nlinks = false").gate("transfer", {}))
    by_link = offer(p["inbox"], on_behalf_of="ana", door="link")
    assert "takes no decision through a link" in (tally.refusal(by_link) or "")
    assert tally.refusal(offer(p["inbox"], on_behalf_of="ana", door="inbox")) is None
