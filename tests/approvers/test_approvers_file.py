"""The approvers file, the policy conditions and the signed document, without a server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from codemode.activities.approval_gate import resolve_path
from codemode.approvals import approvers_file as config
from codemode.approvals import keys
from codemode.approvals.gate import ApprovalGate
from codemode.approvals.policy import holds
from codemode.approvals.signing import verify_signature
from codemode.approvals.tally import CallTally, Offer

from .helpers import Person


def parse(text: str) -> config.ApproversFile:
    return config.ApproversFile.parse(text.encode(), "approvers.toml")


def test_the_shape_the_issue_names_is_read() -> None:
    ana = Person("ana")
    file = parse(
        f'[people.ana]\nkeys = ["{ana.public}"]\ngroups = ["finance"]\n\n[people.bob]\n'
        '\n[tools.send_email]\napprovers = ["group:finance", "bob"]\nrequired = 1\nfour_eyes = false\n'
    )
    gate = file.gate("send_email", {})
    assert (gate.rule, gate.approvers, gate.required, gate.four_eyes) == ("tools.send_email", ["ana", "bob"], 1, False)
    assert gate.keys == {ana.public: "ana"} and gate.configured and len(gate.file_sha256) == 64


def test_rules_by_tool_glob_and_source() -> None:
    file = parse(
        '[people.ana]\ngroups = ["ops"]\n[people.bob]\n'
        '[tools."mcp:fs/*"]\napprovers = ["group:ops"]\nrequired = 2\n'
        '[tools."mcp:fs/write_file"]\nfour_eyes = true\n'
        '[defaults]\napprovers = ["bob"]\n[defaults.cli]\napprovers = ["ana"]\n'
    )
    assert file.rule_for("mcp:fs/read_file")[0] == "tools.mcp:fs/*"
    name, rule = file.rule_for("mcp:fs/write_file")
    assert name == "tools.mcp:fs/write_file" and rule.four_eyes and rule.approvers == ["bob"]  # defaults underneath
    assert file.rule_for("cli:git/push") == ("defaults.cli", file.rule_for("cli:git/push")[1])
    assert file.gate("cli:git/push", {}).approvers == ["ana"]
    assert file.gate("send_email", {}).rule == "defaults"
    assert parse("[people.ana]\n").gate("x", {}).approvers == ["*"]  # no rules: anyone listed


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[people.ana]\nkeys = ['nope']\n", "not an Ed25519 public key"),
        ("[tools.x]\napprovers = ['carol']\n", "'carol' is not in [people]"),
        ("[people.ana]\n[tools.x]\napprovers = ['group:legal']\n", "no person is in group 'legal'"),
        ("[people.ana]\nkeyz = []\n", "people.ana.keyz"),
        ("[tools.x]\nrequired = 0\n", "tools.x.required"),
        (
            "[[policy]]\nname = 'p'\ntool = 'x'\ndecision = 'allow'\nwhen = { to = { endz = 'a' } }\n",
            "unknown operator",
        ),
        ("[[policy]]\nname = 'p'\ndecision = 'allow'\n", "names no tool"),
        ("[people\n", "not valid TOML"),
    ],
)
def test_a_broken_file_says_where(text: str, says: str) -> None:
    with pytest.raises(config.ApproversFileError, match="approvers.toml") as err:
        parse(text)
    assert says in str(err.value)


def test_a_worker_with_a_broken_file_refuses_to_start(tmp_path) -> None:
    bad = tmp_path / "a.toml"
    bad.write_text("[tools.x]\napprovers = ['nobody']\n")
    with pytest.raises(config.ApproversFileError, match="'nobody' is not in"):
        resolve_path(bad)
    assert resolve_path(None) is None


def test_policy_conditions() -> None:
    when = {"to": {"endswith": "@ourco.com"}, "amount": {"le": 100}}
    assert holds(when, {"to": "a@ourco.com", "amount": 5})
    assert holds(when, {"to": ["a@ourco.com", "b@ourco.com"], "amount": 5})  # every recipient
    assert not holds(when, {"to": ["a@ourco.com", "x@evil.com"], "amount": 5})
    assert not holds(when, {"to": "a@ourco.com", "amount": 500})
    assert not holds(when, {"to": "a@ourco.com"})  # missing: no
    assert not holds(when, {"to": "a@ourco.com", "amount": "5"})  # a string is not a number
    assert holds({"cc": {"exists": False}}, {})
    assert holds({"mode": "dry-run"}, {"mode": "dry-run"}) and not holds({"mode": "dry-run"}, {"mode": "live"})
    assert holds({"branch": {"matches": "feature/.*"}}, {"branch": "feature/x"})
    assert holds({"env": {"in": ["dev", "test"]}}, {"env": "dev"})


def test_the_first_matching_policy_rule_decides() -> None:
    file = parse(
        "[people.ana]\n"
        "[[policy]]\nname = 'block'\ntool = 'send_*'\ndecision = 'deny'\nwhen = { to = { endswith = '@evil.com' } }\n"
        "[[policy]]\nname = 'own'\ntool = 'send_email'\ndecision = 'allow'\nwhen = { to = { endswith = '@ourco.com' } }\n"
    )
    assert (
        file.gate("send_email", {"to": "x@evil.com"}).verdict,
        file.gate("send_email", {"to": "x@evil.com"}).policy_rule,
    ) == ("deny", "policy.block")
    assert file.gate("send_email", {"to": "x@ourco.com"}).verdict == "allow"
    assert file.gate("send_email", {"to": "x@else.com"}).verdict == "ask"


def test_signing_covers_every_claim() -> None:
    ana = Person("ana")
    from codemode.workflows.models import PendingApproval

    call = PendingApproval(call_id="1", tool="t", args=["a"], kwargs={"n": 1})
    sig = ana.sign("exec-1", call)
    assert verify_signature(sig)
    for field, value in [
        ("call_id", "2"),
        ("execution_id", "exec-2"),
        ("decision", "deny"),
        ("signer", "bob"),
        ("arguments_sha256", "0" * 64),
        ("signed_at", sig.signed_at + timedelta(seconds=1)),
        ("on_behalf_of", "cy"),
    ]:
        assert not verify_signature(sig.model_copy(update={field: value})), field


def test_a_service_signs_for_the_people_it_may() -> None:
    inbox, ana = Person("inbox"), Person("ana")
    gate = ApprovalGate(
        configured=True,
        tool="t",
        rule="tools.t",
        approvers=["ana"],
        approvers_listed=["ana"],
        keys={inbox.public: "inbox", ana.public: "ana"},
        signs_for={"inbox": ["ana"]},
    )
    from codemode.workflows.models import PendingApproval

    call = PendingApproval(call_id="1", tool="t")
    tally = CallTally("x", "1", [], {}, gate, asked_at=datetime.now(UTC))
    for_ana = inbox.sign("x", call, on_behalf_of="ana")
    assert tally.refusal(Offer("approve", for_ana)) is None and for_ana.approver == "ana"
    for_bob = inbox.sign("x", call, on_behalf_of="bob")
    assert tally.refusal(Offer("approve", for_bob)) == "inbox may not sign for bob (signs_for in the approvers file)"
    old = ana.sign("x", call, signed_at=datetime.now(UTC) - timedelta(hours=1))
    assert "before call 1 asked" in (tally.refusal(Offer("approve", old)) or "")


def test_keygen_honours_xdg_config_home(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path, public = keys.generate("ana")
    assert path == tmp_path / "codemode" / "approvers" / "ana.key" and (path.stat().st_mode & 0o777) == 0o600
    assert keys.public_text(keys.load_for("ana").public_key()) == public
    with pytest.raises(keys.ApproverKeyError, match="invalid approver name"):
        keys.key_path("../etc")
