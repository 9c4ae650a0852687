"""The words around a waiting call (issue 46), without a server: refusals said as sentences,
JSON mistakes located, times as people say them, where sign-in may send a person back to, the
notify config ``codemode dev`` runs with, what the run writes into its details and its timer,
and code wrapped for the web UI's narrow column."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from codemode.approvals.notify.config import Links, NotifyConfig, Webhook
from codemode.apps.cli.dev_inbox import dev_notify
from codemode.apps.inbox.app import _local
from codemode.apps.inbox.wording import ago, decision_sentence, json_problem, refusal
from codemode.client.histories.decisions import ApprovalAudit, argument_changes, call_with, edits_in_brief
from codemode.workflows.models import CodeExecutionRequest, PendingApproval
from codemode.workflows.summary import DETAILS_WIDTH, execution_details, readable_code
from codemode.workflows.waiting_words import CODE_WIDTH, details, memo_extras, timer_summary, wrap_code

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LONG = 'receipt = send_email(to="ana@example.com", subject="Weather", body=f"Paris: {w[\'temp_c\']}C, {w[\'sky\']}")'


def test_a_refusal_reads_as_a_sentence() -> None:
    assert refusal("ValueError: the edited arguments do not fit send_money") == (
        "the edited arguments do not fit send_money."
    )
    assert refusal("DecisionRefused: ApplicationError: call 2 was already approved by ana") == (
        "call 2 was already approved by ana."
    )
    assert refusal("nothing to decide (it ended).") == "nothing to decide (it ended)."


def test_a_json_mistake_is_located_in_words() -> None:
    with pytest.raises(json.JSONDecodeError) as err:
        json.loads('{"to": "bo",\n "amount": 1\n "memo": 2}')
    assert json_problem(err.value) == "at line 3, column 2, a comma or a closing brace is missing"


def test_times_as_people_say_them() -> None:
    assert ago(NOW - timedelta(seconds=10), NOW) == "just now"
    assert ago(NOW - timedelta(minutes=3), NOW) == "3 min ago"
    assert ago(NOW - timedelta(hours=5), NOW) == "5 h ago"
    assert ago(NOW - timedelta(days=2), NOW) == "2 d ago"
    assert ago(NOW + timedelta(minutes=30), NOW) == "in 30 min"


def test_sign_in_sends_back_only_to_this_inbox() -> None:
    assert _local("/calls/exec-1/2?x=1") == "/calls/exec-1/2?x=1"
    for elsewhere in ("//evil.example", "/\\evil.example", "https://evil.example/", "calls", "", None):
        assert _local(elsewhere) == "/"


def test_an_edit_reads_as_asked_against_ran_with() -> None:
    asked, approved = {"to": "acme", "amount": 1200}, {"to": "acme", "amount": 1000, "memo": "x"}
    kinds = {c.name: c.kind for c in argument_changes(asked, approved)}
    assert kinds == {"to": "same", "amount": "changed", "memo": "added"}
    approval = ApprovalAudit(
        call_id="1",
        decision="approved",
        by="ana",
        at=NOW,
        door="inbox",
        asked_arguments=asked,
        approved_arguments=approved,
    )
    assert edits_in_brief(approval) == 'edited: amount 1200 → 1000, memo added: "x"'
    assert decision_sentence(approval) == 'approved by ana in the inbox (edited: amount 1200 → 1000, memo added: "x")'
    assert call_with("send_money", approved) == "send_money(to='acme', amount=1000, memo='x')"


def test_dev_completes_the_notify_config_with_its_inbox() -> None:
    hooks = [Webhook(url="https://hooks.example.com/a"), Webhook(url="https://hooks.example.com/b", approver="bo")]
    made = dev_notify(NotifyConfig(webhooks=hooks), "http://127.0.0.1:8244", "ana")
    assert made.inbox_url == "http://127.0.0.1:8244" and made.links is not None and len(made.links.secret) >= 32
    assert [h.approver for h in made.webhooks] == ["ana", "bo"]  # links name the person dev signs in
    assert dev_notify(None, "http://127.0.0.1:8244", "ana").inbox_url == "http://127.0.0.1:8244"
    kept = dev_notify(NotifyConfig(links=Links(secret="s" * 40)), "http://127.0.0.1:8244", "ana")
    assert kept.links is not None and kept.links.secret == "s" * 40
    # A config that names its team's inbox keeps it: its links are that inbox's business.
    theirs = NotifyConfig(webhooks=hooks, inbox_url="https://approvals.example.com")
    assert dev_notify(theirs, "http://127.0.0.1:8244", "ana") == theirs


def test_a_waiting_call_leads_with_its_page() -> None:
    page = "http://127.0.0.1:8244/calls/exec-1/3"
    p = PendingApproval(call_id="3", tool="send_email", summary="send_email(to='ana@example.com')", line=3)
    assert timer_summary(p).startswith("waits for a person (codemode approve or deny, call 3)")
    p.inbox_url, p.tool_doc = page, "Send an email."
    assert timer_summary(p) == f"waits for a person, decide at {page} : send_email(to='ana@example.com')"
    assert memo_extras(p, "cy") == {"inbox_url": page, "started_by": "cy", "tool_doc": "Send an email."}
    code = f'# mail\nw = get_weather("Paris")\n{LONG}\nreceipt["sent"]'
    text = details("exec-1", [p], {}, code)
    assert text.index(f"Decide in the inbox: [{page}]({page})") < text.index("codemode approve exec-1 3")
    assert "Send a Signal" in text and "--by NAME" not in text
    signed = details("exec-1", [p], {"3": "1 of 2 approvals (ana)"}, code)
    assert "(1 of 2 approvals (ana))" in signed and "codemode approve exec-1 3 --by NAME" in signed


def test_code_is_wrapped_for_the_uis_column() -> None:
    lines = wrap_code(f"a\n{LONG}\nb", 2)
    assert lines[1].startswith("▶   2  receipt = send_email(")
    assert all(len(line) <= CODE_WIDTH + 7 for line in lines), lines
    assert "".join(line[7:].removeprefix("↪ ") for line in lines[1:-1]).replace(" ", "") == LONG.replace(" ", "")
    wrapped = readable_code(f"def f():\n    {LONG}\n")
    assert all(len(line) <= DETAILS_WIDTH for line in wrapped.splitlines()), wrapped
    assert wrapped.splitlines()[2].startswith("        ↪ ")  # under its line's indentation
    assert execution_details(CodeExecutionRequest(code="x = 1")) == "```python\nx = 1\n```"
