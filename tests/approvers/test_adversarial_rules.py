"""Model-written code against the rules (issue 45): the corpus of calls an attacker's code would
try, each judged by the real step (validation, ``approval_when``/predicates) and the real gate
activity (the approvers file's ``[[policy]]``), and run through the real tool activity. Every case
must end denied, asked or allowed exactly as the rule says for the values the tool receives;
no case moves money without the rule or a person allowing that exact value.

On main 85705d4 the first case allowed ``transfer(to="x@ourco.com", amount="20000")`` by the
second rule without asking anyone (a number comparison on a string was "no match"), and the tool
then sent 20000."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from codemode.activities import ToolRegistry
from codemode.activities.approval_gate import ApproverActivities
from codemode.activities.models import ToolInput
from codemode.activities.step_loop import _call_request
from codemode.activities.tool_activity import make_tool_activity
from codemode.approvals import approvers_file as config
from codemode.approvals.approval_when import ApprovalRules, Condition
from codemode.approvals.gate import GateInput
from codemode.runtimes import FunctionCall

from . import bank_tools
from .conftest import read_events

POLICY = """
[people.ana]

[[policy]]
name = "big"
tools = ["transfer", "payroll", "pay"]
decision = "deny"
when = { amount = { gt = 10000 } }

[[policy]]
name = "nested-big"
tool = "pay"
decision = "deny"
when = { "payment.amount" = { gt = 10000 } }

[[policy]]
name = "own-domain"
tools = ["transfer", "payroll"]
decision = "allow"
when = { to = { matches = '[^@\\s,;]+@ourco\\.com' } }

[[policy]]
name = "own-domain-object"
tool = "pay"
decision = "allow"
when = { "payment.to" = { endswith = "@ourco.com" } }
"""

LONG = "a" * 100_000 + "@ourco.com"

#: (name, tool, args, kwargs). Values as a model's code may pass them (taken from an input or
#: an untyped result: the type check lets them through).
CORPUS: list[tuple[str, str, list[Any], dict[str, Any]]] = [
    ("a string for a number", "transfer", [], {"to": "x@ourco.com", "amount": "20000"}),
    ("a string for a small number", "transfer", [], {"to": "x@ourco.com", "amount": "200"}),
    ("a float for an int", "transfer", [], {"to": "x@ourco.com", "amount": 20000.0}),
    ("a fractional float", "transfer", [], {"to": "x@ourco.com", "amount": 10000.5}),
    ("a bool for an int", "transfer", [], {"to": "x@ourco.com", "amount": True}),
    ("positional", "transfer", ["x@ourco.com", 20000], {}),
    ("positional and keyword", "transfer", ["x@ourco.com"], {"amount": "20000"}),
    ("a keyword twice", "transfer", ["x@ourco.com", 5], {"amount": 20000}),
    ("an extra argument", "transfer", [], {"to": "x@ourco.com", "amount": 5, "amount2": 20000}),
    ("a list for a scalar", "transfer", [], {"to": ["x@ourco.com"], "amount": 5}),
    ("a list for an amount", "transfer", [], {"to": "x@ourco.com", "amount": [20000]}),
    ("a dict for an amount", "transfer", [], {"to": "x@ourco.com", "amount": {"value": 20000}}),
    ("a look-alike domain", "transfer", [], {"to": "x@оurco.com", "amount": 5}),  # Cyrillic о
    ("a zero-width suffix", "transfer", [], {"to": "x@ourco.com\u200b", "amount": 5}),
    ("full-width digits", "transfer", [], {"to": "x@ourco.com", "amount": "２００００"}),
    ("two addresses in one string", "transfer", [], {"to": "x@evil.com, y@ourco.com", "amount": 5}),
    ("a newline before the domain", "transfer", [], {"to": "x@evil.com\ny@ourco.com", "amount": 5}),
    ("a very long address", "transfer", [], {"to": LONG, "amount": 5}),
    ("a huge number", "transfer", [], {"to": "x@ourco.com", "amount": 10**30}),
    ("a number in a string with spaces", "transfer", [], {"to": "x@ourco.com", "amount": " 20000 "}),
    ("scientific notation", "transfer", [], {"to": "x@ourco.com", "amount": "2e4"}),
    ("a negative amount", "transfer", [], {"to": "x@ourco.com", "amount": -20000}),
    ("a memo default", "transfer", [], {"to": "x@ourco.com", "amount": 5}),
    ("a list of recipients, one outside", "payroll", [], {"to": ["a@ourco.com", "b@evil.com"], "amount": "5"}),
    ("a list of recipients, all inside", "payroll", [], {"to": ["a@ourco.com", "b@ourco.com"], "amount": "5"}),
    ("an empty list of recipients", "payroll", [], {"to": [], "amount": "5"}),
    ("a string for a list", "payroll", [], {"to": "a@ourco.com", "amount": "5"}),
    ("a decimal string", "payroll", [], {"to": ["a@ourco.com"], "amount": "10000.01"}),
    ("a float for a decimal", "payroll", [], {"to": ["a@ourco.com"], "amount": 1e5}),
    ("NaN", "payroll", [], {"to": ["a@ourco.com"], "amount": "NaN"}),
    ("infinity", "payroll", [], {"to": ["a@ourco.com"], "amount": "Infinity"}),
    ("a nested string for a number", "pay", [], {"payment": {"to": "x@ourco.com", "amount": "20000"}}),
    ("a nested small payment", "pay", [], {"payment": {"to": "x@ourco.com", "amount": 20}}),
    ("a nested extra field", "pay", [], {"payment": {"to": "x@ourco.com", "amount": 20, "amount_": 20000}}),
    ("a nested payment outside", "pay", [], {"payment": {"to": "x@evil.com", "amount": 20}}),
]


def _oracle(tool: str, received: dict[str, Any]) -> str:
    """What the file says for the values the tool receives, written plainly (not by the
    evaluator under test): the first rule that matches, with deny winning a comparison it
    cannot make."""
    amount = received["payment"].amount if tool == "pay" else received["amount"]
    if isinstance(amount, float | Decimal) and amount != amount:  # NaN: cannot be compared
        return "deny"
    if amount > 10000:
        return "deny"
    to = received["payment"].to if tool == "pay" else received["to"]
    recipients = to if isinstance(to, list) else [to]
    ours = bool(recipients) and all(
        r.count("@") == 1
        and r.endswith("@ourco.com")
        and r.split("@")[0] != ""
        and not any(c.isspace() or c in ",;" for c in r.split("@")[0])
        for r in recipients
    )
    if tool == "pay":
        ours = to.endswith("@ourco.com")
    return "allow" if ours else "ask"


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    return ToolRegistry.from_module(bank_tools)


@pytest.fixture
def gate(tmp_path: Path, registry: ToolRegistry) -> ApproverActivities:
    path = tmp_path / "approvers.toml"
    path.write_text(POLICY)
    config.load(path)
    return ApproverActivities(path, registry)


@pytest.mark.parametrize(("name", "tool", "args", "kwargs"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_each_call_ends_as_the_rules_say_for_what_the_tool_receives(
    name: str, tool: str, args: list[Any], kwargs: dict[str, Any], registry, gate, events_file
) -> None:
    spec = registry[tool]
    try:
        received = spec.received(args, kwargs)
    except (TypeError, ValueError):
        return  # refused before it runs: the code gets the error, nothing asks, nothing moves
    call = FunctionCall(call_id="1", function_name=tool, args=args, kwargs=kwargs)
    request = _call_request(call, spec, received)
    assert request.requires_approval and request.received_sha256
    verdict = (
        await ActivityEnvironment().run(
            gate.gate, GateInput(execution_id="x", call_id="1", tool=tool, args=args, kwargs=kwargs)
        )
    ).verdict
    assert verdict == _oracle(tool, received), (name, received)
    if verdict != "allow":
        return
    # Allowed: the tool runs with exactly the values judged (its activity checks it).
    run = make_tool_activity(spec)
    await ActivityEnvironment().run(
        run, ToolInput(call_id="1", args=args, kwargs=kwargs, received_sha256=request.received_sha256)
    )
    (moved,) = read_events(events_file)
    assert _oracle(tool, spec.received(args, kwargs)) == "allow" and float(moved["amount"]) <= 10000


async def test_a_tool_that_validates_otherwise_than_the_rules_judged_does_not_run(registry, events_file) -> None:
    """The values judged are the values run: a call whose arguments validate to something else
    in the tool's activity (a validator that gives another value each time, a tool changed
    between the step and the run) is refused there, never run."""
    from temporalio.exceptions import ApplicationError

    spec = registry["transfer"]
    run = make_tool_activity(spec)
    judged = spec.received_sha256([], {"to": "x@ourco.com", "amount": "200"})
    with pytest.raises(ApplicationError, match="other values than the approval rules judged"):
        await ActivityEnvironment().run(
            run, ToolInput(call_id="1", kwargs={"to": "x@ourco.com", "amount": "20000"}, received_sha256=judged)
        )
    assert read_events(events_file) == []


def test_predicates_and_approval_when_see_the_validated_values(registry) -> None:
    """``@tool(requires_approval=predicate)`` and ``approval_when`` judge the values the tool
    receives: "900" asks as 900 does; before, the string made the predicate raise (and a
    ``>`` condition was "no match" in the policy language)."""
    spec = registry["tip"]
    for amount, asks in (("900", True), (900, True), ("400", False), (400.0, False)):
        call = FunctionCall(call_id="1", function_name="tip", args=[], kwargs={"to": "a", "amount": amount})
        request = _call_request(call, spec, spec.received(call.args, call.kwargs))
        assert request.requires_approval is asks, amount
        if asks:
            assert request.arguments == {"to": "a", "amount": float(amount)}  # what the person sees
    rules = ApprovalRules([Condition(argument="amount", op=">", value=500)])
    assert rules.decide({"amount": 900}) == (True, "approval_when: amount > 500")
    assert rules.decide({"amount": 400}) == (False, None)
    asks, why = rules.decide({"amount": "900"})  # a value no schema typed: cannot be compared
    assert asks and "could not be checked" in (why or "")


def test_one_language_one_meaning() -> None:
    """``approval_when`` and ``[[policy]] when`` are two spellings of one language: the same
    operator means the same thing in both (``matches`` is a whole-value match, ``search`` finds
    a pattern anywhere), and a condition that cannot be judged fails closed by the rule's kind."""
    from codemode.approvals import conditions, policy

    args = {"to": "x@evil.com?@ourco.com", "amount": "lots", "cc": ["a@ourco.com", "b@evil.com"]}
    assert not policy.holds({"to": {"matches": ".*@ourco\\.com"}}, {"to": "x@ourco.com\n"})
    assert policy.holds({"to": {"search": "evil"}}, args)
    when = Condition(argument="to", op="matches", value="[^@?]+@ourco\\.com")
    assert ApprovalRules([when]).decide(args) == (False, None)  # whole value: the trick fails
    assert policy.holds({"to": {"matches": "[^@?]+@ourco\\.com"}}, args, "allow") is False
    # An unjudgeable condition: deny and ask match, allow does not.
    for kind, matched in (("deny", True), ("ask", True), ("allow", False)):
        assert policy.judge({"amount": {"gt": 10}}, args, kind).matched is matched
    # A list: allow needs every item, deny and ask any.
    assert policy.holds({"cc": {"endswith": "@ourco.com"}}, args, "allow") is False
    assert policy.holds({"cc": {"endswith": "@evil.com"}}, args, "deny") is True
    assert conditions.Condition.make("amount", ">", 1) == conditions.Condition.make("amount", "gt", 1)
    with pytest.raises(conditions.ConditionError):
        conditions.Condition.make("amount", "~", 1)


async def test_a_value_from_an_input_is_judged_as_the_tool_receives_it(
    client, task_queue, tmp_path, events_file
) -> None:
    """End to end, the finding as reported: deny "amount > 10000", then allow our own domain;
    code passes the amount as the string "20000" from an input (the type check cannot see it).
    The call is denied by the first rule, and nothing moves."""
    from codemode.client.executions import start_execution
    from codemode.worker.worker import CodeModeWorker
    from codemode.workflows.models import CodeExecutionRequest

    path = tmp_path / "approvers.toml"
    path.write_text(POLICY)
    code = "try:\n    transfer(to='x@ourco.com', amount=amt)\n    r = 'sent'\nexcept PermissionError as e:\n    r = str(e)\nr"
    registry = ToolRegistry.from_module(bank_tools)
    async with CodeModeWorker(client, registry, task_queue=task_queue, approvers=path).running():
        handle = await start_execution(
            client, CodeExecutionRequest(code=code, inputs={"amt": "20000"}), task_queue=task_queue
        )
        outcome = await handle.result()
        small = await start_execution(
            client, CodeExecutionRequest(code=code, inputs={"amt": "200"}), task_queue=task_queue
        )
        allowed = await small.result()
    assert "denied by policy.big" in outcome.output
    assert allowed.output == "sent"
    assert [(e["tool"], e["amount"]) for e in read_events(events_file)] == [("transfer", 200)]
