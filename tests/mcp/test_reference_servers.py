"""The npm reference MCP servers (memory, filesystem, everything) as namespaces in code,
each call a durable tool activity: results as Python values, approvals from annotations,
canonical ids in the audit, dashed names through aliases, bytes kept out of the history."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, DenySignal

from ..workflows.test_approval import wait_for_state
from .conftest import mcp_worker
from .servers import reference_server


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fs-root")
    (root / "notes.txt").write_text("first line\nsecond line\n")
    (root / "docs").mkdir()
    return root


@pytest.fixture(scope="module")
async def worker(client, files: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[CodeModeWorker]:
    memory_file = tmp_path_factory.mktemp("memory") / "memory.jsonl"
    servers = {
        "memory": reference_server("memory", env={"MEMORY_FILE_PATH": str(memory_file)}),
        "fs": reference_server("filesystem", str(files)),
        "everything": reference_server(
            "everything",
            tools={
                "include": ["get-*", "trigger-long-running-operation", "echo"],
                "settings": {"trigger-long-running-operation": {"timeout": 30}},
            },
        ),
    }
    async with mcp_worker(client, servers) as w:
        yield w


async def run(client, worker: CodeModeWorker, code: str, **request):
    handle = await start_execution(client, CodeExecutionRequest(code=code, **request), task_queue=worker.task_queue)
    return handle, await asyncio.wait_for(handle.result(), 60)


GRAPH = """
memory.create_entities(entities=[
    {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]},
    {"name": "Engine", "entityType": "machine", "observations": []},
])
memory.create_relations(relations=[{"from": "Ada", "to": "Engine", "relationType": "programmed"}])
found = memory.search_nodes(query="Ada")
graph = memory.read_graph()
[sorted(e["name"] for e in graph["entities"]), graph["relations"], [e["name"] for e in found["entities"]]]
"""


async def test_memory_graph_round_trip(client, worker) -> None:
    handle, outcome = await run(client, worker, GRAPH)
    assert outcome.success, outcome.error
    assert outcome.output == [
        ["Ada", "Engine"],
        [{"from": "Ada", "to": "Engine", "relationType": "programmed"}],
        ["Ada"],
    ]
    calls = outcome.tool_calls
    assert [c.tool for c in calls] == [
        "mcp:memory/create_entities",
        "mcp:memory/create_relations",
        "mcp:memory/search_nodes",
        "mcp:memory/read_graph",
    ]
    assert calls[2].summary == "memory.search_nodes(query='Ada')"
    assert all(c.status == "ok" and c.attempts == 1 for c in calls)
    audit = await fetch_audit(client, handle.id)  # the audit and the history name canonical ids
    assert [c.tool for c in audit.calls] == [c.tool for c in calls]
    assert audit.calls[0].summary.startswith("memory.create_entities(entities=[")


async def test_destructive_tool_parks_and_a_denial_raises_permission_error(client, worker) -> None:
    await run(
        client, worker, 'memory.create_entities(entities=[{"name": "Keep", "entityType": "x", "observations": []}])'
    )
    code = (
        "try:\n"
        "    memory.delete_entities(entityNames=['Keep'])\n"
        "    r = 'deleted'\n"
        "except PermissionError as e:\n"
        "    r = 'refused: ' + str(e)\n"
        "[r, [e['name'] for e in memory.open_nodes(names=['Keep'])['entities']]]"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
    status = await wait_for_state(handle, "awaiting_approval")
    (pending,) = status.pending_approvals
    assert pending.tool == "mcp:memory/delete_entities"
    assert pending.summary == "memory.delete_entities(entityNames=['Keep'])"
    await handle.signal("deny", DenySignal(call_id=pending.call_id, by="dana", reason="keep it"))
    outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome.success, outcome.error
    assert outcome.output == [
        "refused: memory.delete_entities(entityNames=['Keep']) was denied by dana: keep it",
        ["Keep"],
    ]
    assert [c.status for c in outcome.tool_calls] == ["denied", "ok"]


async def test_filesystem_read_and_an_approved_write_lands_once(client, worker, files: Path) -> None:
    root = str(files)
    code = (
        f"listing = fs.list_directory(path={root!r})\n"
        f"text = fs.read_text_file(path={root!r} + '/notes.txt')\n"
        "first = text['content'].splitlines()[0]\n"
        f"fs.write_file(path={root!r} + '/docs/summary.txt', content='summary: ' + first)\n"
        "[listing['content'], first]"
    )
    handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
    status = await wait_for_state(handle, "awaiting_approval")
    (pending,) = status.pending_approvals
    assert pending.tool == "mcp:fs/write_file"
    assert not (files / "docs" / "summary.txt").exists()  # nothing written before the approval
    await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="erin"))
    outcome = await asyncio.wait_for(handle.result(), 30)
    assert outcome.success, outcome.error
    listing, first = outcome.output
    assert "[FILE] notes.txt" in listing and "[DIR] docs" in listing
    assert first == "first line"
    assert (files / "docs" / "summary.txt").read_text() == "summary: first line"
    write = outcome.tool_calls[-1]
    assert (write.tool, write.status, write.attempts, write.approval.by) == ("mcp:fs/write_file", "ok", 1, "erin")


async def test_everything_aliases_structured_content_images_and_a_long_operation(client, worker) -> None:
    code = (
        "s = everything.get_sum(a=2, b=3)\n"
        "weather = everything.get_structured_content(location='Chicago')\n"
        "image = everything.get_tiny_image()\n"
        "done = everything.trigger_long_running_operation(duration=2, steps=2)\n"
        "[s, sorted(weather), image, done]"
    )
    handle, outcome = await run(client, worker, code)
    assert outcome.success, outcome.error
    total, weather_keys, image, done = outcome.output
    assert total == "The sum of 2 and 3 is 5."
    assert weather_keys == ["conditions", "humidity", "temperature"]  # structuredContent, as is
    assert done.startswith("Long running operation completed")
    caption, handle_dict, _ = image
    assert caption.startswith("Here's the image")
    assert handle_dict["type"] == "image" and handle_dict["mime_type"] == "image/png"
    png = await worker.mcp.read_content(handle_dict)  # the bytes live in the object store
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) == handle_dict["size"] > 1000
    assert [c.tool for c in outcome.tool_calls] == [
        "mcp:everything/get-sum",
        "mcp:everything/get-structured-content",
        "mcp:everything/get-tiny-image",
        "mcp:everything/trigger-long-running-operation",
    ]
    assert outcome.tool_calls[0].summary == "everything.get_sum(a=2, b=3)"
    # No image bytes anywhere in the history: only the handle.
    history = json.dumps([e.model_dump(mode="json") for e in (await fetch_audit(client, handle.id)).calls])
    assert "iVBORw0KGgo" not in history and handle_dict["ref"] in history


async def test_approval_when_parks_one_write_and_runs_another(client, tmp_path: Path) -> None:
    """``approval_when`` on an MCP tool, through the workflow (issue 36): the filesystem
    server's ``write_file`` waits for a person for a ``.conf`` path only; the plain write runs
    without asking, and the history records which call asked, why, and who approved."""
    rule = [{"argument": "path", "op": "endswith", "value": ".conf"}]
    servers = {
        "fs": reference_server("filesystem", str(tmp_path), tools={"settings": {"write_file": {"approval_when": rule}}})
    }
    root = str(tmp_path)
    code = (
        f"fs.write_file(path={root!r} + '/notes.txt', content='plain')\n"
        f"fs.write_file(path={root!r} + '/app.conf', content='debug = true')\n"
        f"fs.read_text_file(path={root!r} + '/app.conf')['content']"
    )
    async with mcp_worker(client, servers) as worker:
        handle = await start_execution(client, CodeExecutionRequest(code=code), task_queue=worker.task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
        (pending,) = status.pending_approvals
        assert pending.tool == "mcp:fs/write_file"
        # The summary is cut to a few dozen characters: a long tmp path pushes the content out.
        assert pending.summary.startswith("fs.write_file(path=")
        assert pending.kwargs["path"] == root + "/app.conf"
        assert pending.reason == "approval_when: path endswith '.conf'"
        assert (tmp_path / "notes.txt").read_text() == "plain"  # ran without a person
        assert not (tmp_path / "app.conf").exists()  # nothing written before the approval
        await handle.signal("approve", ApproveSignal(call_id=pending.call_id, by="erin"))
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert outcome.success and outcome.output == "debug = true", outcome.error
    assert [(c.tool, c.status, c.approval is not None) for c in outcome.tool_calls] == [
        ("mcp:fs/write_file", "ok", False),
        ("mcp:fs/write_file", "ok", True),
        ("mcp:fs/read_text_file", "ok", False),
    ]
    audit = await fetch_audit(client, handle.id)  # the history: asked once, for the .conf write only
    plain, conf, _ = audit.calls
    assert not plain.requires_approval and plain.approval is None
    assert conf.requires_approval and conf.approval.by == "erin" and conf.approval.decision == "approved"
    assert conf.arguments == {"path": root + "/app.conf", "content": "debug = true"}
    assert [e.call_id for e in audit.events if e.kind == "requested"] == [conf.call_id]
