"""End-to-end executions on a real dev server: outputs, in-band errors, retries, validation."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes import ExecutionLimits
from codemode.workflows.models import CodeExecutionRequest

from .conftest import read_events


async def run(client, task_queue, code, **kw):
    handle = await start_execution(client, CodeExecutionRequest(code=code, **kw), task_queue=task_queue)
    outcome = await handle.result()
    desc = await handle.describe()
    assert desc.status == WorkflowExecutionStatus.COMPLETED  # code errors never fail the workflow
    return outcome


async def test_sequential_and_gathered_calls(client, task_queue, worker, events_file) -> None:
    code = (
        "import asyncio\n"
        "a = slow_step(1, 0.01)\n"
        "b = await asyncio.gather(*[fetch(i) for i in range(5)])\n"
        "print('sum', a + sum(b))\n"
        "{'a': a, 'b': b}\n"
    )
    outcome = await run(client, task_queue, code)
    assert outcome.success, outcome.error
    assert outcome.output == {"a": 10, "b": [100, 101, 102, 103, 104]}
    assert outcome.stdout == "sum 520\n"
    assert [c.status for c in outcome.tool_calls] == ["ok"] * 6
    assert len({c.call_id for c in outcome.tool_calls}) == 6
    assert outcome.tool_calls[0].summary == "slow_step(i=1, seconds=0.01)"


async def test_flaky_tool_retried_durably(client, task_queue, worker, events_file) -> None:
    outcome = await run(client, task_queue, "r = flaky('k')\nr")
    assert outcome.success and outcome.output == "ok:k"
    (call,) = outcome.tool_calls
    assert call.attempts == 3 and call.status == "ok"
    starts = [e for e in read_events(events_file) if e["event"] == "start"]
    assert [e["attempt"] for e in starts] == [1, 2, 3]
    assert {e["call_id"] for e in starts} == {call.call_id}  # one logical call, one call id


async def test_tool_error_raised_in_code(client, task_queue, worker) -> None:
    code = "try:\n    lookup('Atlantis')\nexcept ValueError as e:\n    msg = 'caught: ' + str(e)\nmsg"
    outcome = await run(client, task_queue, code)
    assert outcome.success and outcome.output == "caught: unknown city: Atlantis"
    assert outcome.tool_calls[0].status == "error"
    assert outcome.tool_calls[0].attempts == 1  # ValueError is not retried by default
    uncaught = await run(client, task_queue, "x = 1\nlookup('Atlantis')\n")
    assert not uncaught.success
    assert uncaught.error.type == "ValueError" and uncaught.error.line == 2


async def test_bad_arguments_rejected_before_running(client, task_queue, worker, events_file) -> None:
    static = await run(client, task_queue, "slow_step('not a number')")
    assert not static.success and static.error.kind == "type"  # caught by the type checker
    # A value the checker cannot see (an input typed Any) is validated before any attempt.
    code = "try:\n    slow_step(i=bad)\nexcept ValueError as e:\n    err = str(e)\nerr"
    outcome = await run(client, task_queue, code, inputs={"bad": "x"})
    assert outcome.success, outcome.error
    assert "slow_step(): argument 'i'" in outcome.output
    assert outcome.tool_calls[0].status == "error" and outcome.tool_calls[0].attempts == 0
    assert read_events(events_file) == []  # the tool never ran


@pytest.mark.parametrize(
    "code,etype,kind,line",
    [
        ("x = 1\ny = (\n", "SyntaxError", "syntax", 2),
        ("x = slow_step(i=[1])\n", "TypeError", "type", 1),
        ("x = 1\ny = x / 0\n", "ZeroDivisionError", "runtime", 2),
        ("while True:\n    pass\n", "TimeoutError", "timeout", None),
        ("s = 'a' * 10**10\n", "MemoryError", "resource", 1),
    ],
)
async def test_code_errors_in_band(client, task_queue, worker, code, etype, kind, line) -> None:
    outcome = await run(client, task_queue, code, limits=ExecutionLimits(timeout_seconds=2))
    assert not outcome.success
    assert (outcome.error.type, outcome.error.kind) == (etype, kind)
    if line is not None:
        assert outcome.error.line == line


async def test_unknown_tool_in_allow_list_is_input_error(client, task_queue, worker) -> None:
    outcome = await run(client, task_queue, "1", tools=["nope"])
    assert not outcome.success and outcome.error.kind == "input" and "nope" in outcome.error.message


async def test_allow_list_hides_other_tools(client, task_queue, worker) -> None:
    outcome = await run(client, task_queue, "lookup('Paris')", tools=["fetch"])
    assert not outcome.success
    assert outcome.error.type in ("NameError", "TypeError")


async def test_inputs_and_search_attributes(client, task_queue, worker) -> None:
    handle = await start_execution(
        client, CodeExecutionRequest(code="n * 2", inputs={"n": 21}), task_queue=task_queue
    )
    outcome = await handle.result()
    assert outcome.output == 42
    desc = await handle.describe()
    sa = {k: v for k, v in desc.search_attributes.items()}
    assert sa["CodeModeStatus"] == ["completed"] and sa["CodeModeRuntime"] == ["monty"]


def _ours(event) -> bool:
    """A search-attribute update of ours (not Core's own beside the generation's patch marker,
    ``workflows/versions.py``)."""
    from temporalio.api.enums.v1 import EventType

    if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        return False
    return "TemporalChangeVersion" not in event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields


async def test_indexed_from_the_start_and_released_by_the_last_step(client, task_queue, worker) -> None:
    """start_execution sets CodeModeStatus/CodeModeRuntime on the start event, so the workflow
    does not upsert them again; a start that did not (the UI, another SDK) is indexed by the
    workflow itself. The Monty step that ends the code frees its last checkpoint, so no
    release step follows it, and the store keeps nothing of the execution."""
    from temporalio.api.enums.v1 import EventType

    from codemode.worker.converter import default_store
    from codemode.workflows.models import WORKFLOW_TYPE

    code = "a = await fetch(1)\nb = await fetch(2)\na + b"
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=task_queue)
    assert (await handle.result()).output == 203
    events = [e async for e in handle.fetch_history_events()]
    upserts = [e for e in events if _ours(e)]
    assert len(upserts) == 1  # only "completed"
    markers = [
        e
        for e in events
        if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED and e.marker_recorded_event_attributes.marker_name != "core_patch"
    ]
    # The start step only: each call's activity ran the step after it (issue 11), the last
    # of which freed the checkpoint (no release step).
    assert len(markers) == 1
    audit = await fetch_audit(client, handle.id)
    assert [(s.name, s.after, s.kind, s.via) for s in audit.steps] == [
        ("sandbox_start", None, "calls", "started"),
        ("sandbox_resume", "fetch", "calls", "live"),
        ("sandbox_resume", "fetch", "result", "live"),
    ]
    desc = await handle.describe()
    assert desc.typed_search_attributes  # still indexed, and closed as completed
    assert {k: v for k, v in desc.search_attributes.items()}["CodeModeStatus"] == ["completed"]
    store = await default_store()
    prefix = f"codemode/ns/default/wi/{handle.id}/"
    for _ in range(100):  # the last checkpoint is deleted off the step's critical path
        if not await store.list_keys(bucket=store.bucket, prefix=prefix):
            break
        await asyncio.sleep(0.05)
    assert await store.list_keys(bucket=store.bucket, prefix=prefix) == []

    # Started without our search attributes: the workflow indexes itself.
    other = await client.start_workflow(
        WORKFLOW_TYPE, CodeExecutionRequest(code="await fetch(3)"), id=f"{handle.id}-raw", task_queue=task_queue
    )
    await other.result()
    events = [e async for e in other.fetch_history_events()]
    upserts = [e for e in events if _ours(e)]
    assert len(upserts) == 2  # running (with the runtime), then completed
    sa = {k: v for k, v in (await other.describe()).search_attributes.items()}
    assert sa["CodeModeStatus"] == ["completed"] and sa["CodeModeRuntime"] == ["monty"]


async def test_an_option_the_runtime_cannot_honour_is_an_in_band_capability_error(client, task_queue, worker) -> None:
    outcome = await run(client, task_queue, "fetch(1)", packages=["tabulate"])
    assert not outcome.success
    assert outcome.error is not None and outcome.error.kind == "capability"
    assert "cannot install packages (tabulate)" in outcome.error.message
    assert outcome.tool_calls == []
