"""A run that worked becomes a named, typed, versioned function (issue 48), on a real dev server
with a real worker and Monty: promoted with its inputs as parameters, called from new code with
other inputs (the same result as running its code directly), versioned by content, checked
against today's tools before anything runs."""

from __future__ import annotations

import pytest

from codemode.activities import ToolRegistry
from codemode.client.executions import run_execution
from codemode.client.histories.audit import fetch_audit
from codemode.client.snippets import library_of, promote, remove
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import CodeExecutionRequest

from . import snippet_tools
from .conftest import TOOLS_MODULE, read_events

REPORT = """\
# The week's total sales of one region.
rows = sales(week)
total = sum(r["amount"] for r in rows if r["region"] == region)
{"week": week, "region": region, "total": total}"""


@pytest.fixture
async def worker(client, task_queue):
    async with CodeModeWorker(client, ToolRegistry.from_module(TOOLS_MODULE), task_queue=task_queue).running() as w:
        yield w


async def run(client, task_queue, code: str, **request):
    return await run_execution(client, CodeExecutionRequest(code=code, **request), task_queue=task_queue)


async def saved_report(client, task_queue, name: str, code: str = REPORT):
    source = await run(client, task_queue, code, inputs={"week": 46, "region": "eu"})
    assert source.success, source.error
    saved, new = await promote(client, source.execution_id, name, by="ana")
    assert new
    return source, saved


async def test_promote_a_run_and_call_it_with_other_inputs(client, task_queue, worker, events_file) -> None:
    source, saved = await saved_report(client, task_queue, "weekly_report")
    # Its inputs became typed parameters; the tools it calls are recorded with their signatures.
    assert saved.snippet.parameters["properties"] == {"week": {"type": "integer"}, "region": {"type": "string"}}
    assert set(saved.snippet.tools) == {"sales"}
    assert saved.snippet.description == "The week's total sales of one region."
    assert saved.provenance.source_execution == source.execution_id and saved.provenance.promoted_by == "ana"
    assert len(saved.version) == 64 and saved.snippet.version() == saved.version

    called = await run(client, task_queue, "r = snippets.weekly_report(week=47, region='us')\n[r['total'], r['week']]")
    direct = await run(client, task_queue, REPORT, inputs={"week": 47, "region": "us"})
    assert called.success, called.error
    assert called.output == [direct.output["total"], 47] == [471, 47]
    # The run records which version it called: in its outcome, its calls, and its history.
    assert [(u.name, u.version) for u in called.snippets] == [("weekly_report", saved.version)]
    entry, sales_call = called.tool_calls
    assert entry.tool == "snippet:weekly_report" and saved.version[:12] in entry.summary
    assert sales_call.tool == "sales" and sales_call.origin == saved.origin
    audit = await fetch_audit(client, called.execution_id)
    assert [u.version for u in audit.snippets] == [saved.version]
    assert any(f"loaded saved snippet weekly_report@{saved.version[:12]}" in e.text for e in audit.events)
    starts = [e["arg"] for e in read_events(events_file) if e["event"] == "start"]
    assert starts == ["sales:46", "sales:47", "sales:47"]


async def test_a_new_version_and_an_old_one_by_hash(client, task_queue, worker) -> None:
    _, first = await saved_report(client, task_queue, "versioned")
    doubled = REPORT.replace('"total": total', '"total": total * 2')
    _, second = await saved_report(client, task_queue, "versioned", doubled)
    assert second.version != first.version
    library = await library_of(client)
    assert [s.version for s in await library.versions("versioned")] == [first.version, second.version]
    # Saving the same content again finds it saved.
    again = await run(client, task_queue, doubled, inputs={"week": 1, "region": "eu"})
    kept, new = await promote(client, again.execution_id, "versioned", by="bob")
    assert not new and kept.version == second.version and kept.provenance.promoted_by == "ana"

    code = "snippets.versioned(week=2, region='eu')['total']"
    newest = await run(client, task_queue, code)
    pinned = await run(client, task_queue, code, snippets={"versioned": first.version[:12]})
    assert (newest.output, pinned.output) == (40, 20)
    assert pinned.snippets[0].version == first.version
    # Removed, the old version is no longer callable; the newest still is.
    assert await remove(client, "versioned", first.version[:12]) == [first.version]
    gone = await run(client, task_queue, code, snippets={"versioned": first.version[:12]})
    assert not gone.success and gone.error.type == "SnippetError" and "no version" in gone.error.message
    assert (await run(client, task_queue, code)).output == 40


async def test_code_that_calls_an_unknown_snippet_is_refused_before_running(client, task_queue, worker, events_file) -> None:
    outcome = await run(client, task_queue, "sales(1)\nsnippets.nope(x=1)")
    assert not outcome.success
    assert outcome.error.type == "SnippetError" and "no saved snippet named 'nope'" in outcome.error.message
    assert outcome.tool_calls == [] and read_events(events_file) == []


async def test_a_snippet_is_type_checked_where_it_is_called(client, task_queue, worker) -> None:
    await saved_report(client, task_queue, "typed_report")
    outcome = await run(client, task_queue, "snippets.typed_report(week='47', region='us')")
    assert not outcome.success and outcome.error.type == "TypeError" and outcome.error.line == 1


@pytest.mark.parametrize(
    "replacement, fits",
    [
        ("def sales(start: str, end: str) -> list[dict]:\n    return []", False),
        ("def sales(week: int, currency: str = 'EUR') -> list[dict]:\n    return [{'region': 'eu', 'amount': week}]", True),
    ],
    ids=["incompatible", "compatible"],
)
async def test_a_changed_tool_refuses_the_snippet_naming_it(client, task_queue, worker, events_file, replacement, fits) -> None:
    _, saved = await saved_report(client, task_queue, f"report_{'fits' if fits else 'breaks'}")
    namespace: dict = {}
    exec(replacement, namespace)
    registry = ToolRegistry([namespace["sales"], snippet_tools.send_report])
    code = f"snippets.{saved.name}(week=5, region='eu')['total']"
    async with CodeModeWorker(client, registry, task_queue=f"{task_queue}-changed").running():
        outcome = await run_execution(client, CodeExecutionRequest(code=code), task_queue=f"{task_queue}-changed")
    if fits:  # its code still type-checks against the new signature: it runs
        assert outcome.success, outcome.error
        assert outcome.output == 5
        return
    assert not outcome.success and outcome.error.type == "SnippetError"
    assert "sales" in outcome.error.message and saved.version[:12] in outcome.error.message
    assert "no longer fits the tool sales" in outcome.error.message, outcome.error.message
    assert outcome.tool_calls == []


async def test_a_removed_tool_refuses_the_snippet_naming_it(client, task_queue, worker, events_file) -> None:
    await saved_report(client, task_queue, "report_without_sales")
    registry = ToolRegistry([snippet_tools.send_report])
    async with CodeModeWorker(client, registry, task_queue=f"{task_queue}-removed").running():
        outcome = await run_execution(
            client,
            CodeExecutionRequest(code="snippets.report_without_sales(week=5, region='eu')"),
            task_queue=f"{task_queue}-removed",
        )
    assert not outcome.success and outcome.error.type == "SnippetError"
    assert "calls the tool sales, which this execution cannot call" in outcome.error.message
    # And a run whose allow-list leaves the tool out is refused the same way.
    narrow = await run(client, task_queue, "snippets.report_without_sales(week=5, region='eu')", tools=["send_report"])
    assert not narrow.success and "calls the tool sales" in narrow.error.message


async def test_what_cannot_be_promoted(client, task_queue, worker) -> None:
    from codemode.client.snippets import SnippetError

    failed = await run(client, task_queue, "sales(1)\n1 / 0")
    with pytest.raises(SnippetError, match="only a run that completed"):
        await promote(client, failed.execution_id, "broken", by="ana")
    await saved_report(client, task_queue, "inner")
    nested = await run(client, task_queue, "snippets.inner(week=1, region='eu')")
    with pytest.raises(SnippetError, match="cannot call another"):
        await promote(client, nested.execution_id, "outer", by="ana")
    ok = await run(client, task_queue, "sales(1)")
    with pytest.raises(SnippetError, match="invalid snippet name"):
        await promote(client, ok.execution_id, "not a name", by="ana")


async def test_a_name_its_code_never_defines_is_refused_not_read_from_the_caller(client, task_queue, worker) -> None:
    """A CPython run is not type-checked: its code may read an undefined name on a branch it did
    not take. Called later, that name would be the caller's variable: refused before running."""
    code = "if week > 100:\n    r = secret\nelse:\n    r = sales(week)[0]['amount']\nr"
    source = await run(client, task_queue, code, inputs={"week": 1}, runtime="python")
    assert source.success, source.error
    await promote(client, source.execution_id, "leaky", by="ana")
    outcome = await run(client, task_queue, "secret = 'the caller'\nsnippets.leaky(week=200)", runtime="python")
    assert not outcome.success and outcome.error.type == "SnippetError"
    assert "reads secret, which its code never defines" in outcome.error.message
    assert outcome.tool_calls == []
    # Refused whatever the arguments: the check reads the code, not the branch taken.
    again = await run(client, task_queue, "snippets.leaky(week=2)", runtime="python")
    assert not again.success and "reads secret" in again.error.message
