"""A file written through the npm filesystem MCP server, removed by its compensation (issue 47).
The server has no delete tool: the config's ``compensate`` moves the file the call wrote into a
trash directory the server also serves (``move_file``), with the path taken from the call. Through
the workflow, a real worker and dev server; "deny and roll back" on a later call."""

from __future__ import annotations

import asyncio
from pathlib import Path

from codemode.client.executions import start_execution
from codemode.workflows.models import ApprovalRecord, CodeExecutionRequest, Decision

from ..workflows.test_approval import wait_for_state
from .conftest import mcp_worker
from .servers import reference_server


def servers(root: Path, trash: Path) -> dict:
    undo = {
        "tool": "move_file",
        "arguments": {"source": "{args.path}", "destination": f"{trash}/{{call_id}}-{{args.path|basename}}"},
        "approval": "never",
    }
    return {
        "fs": reference_server(
            "filesystem",
            str(root),
            str(trash),
            tools={
                "settings": {
                    "write_file": {"approval": "never", "compensate": undo},
                    "create_directory": {"approval": "always"},
                }
            },
        )
    }


CODE = """
fs.write_file(path=root + "/report.txt", content="draft")
fs.write_file(path=root + "/summary.txt", content="short")
fs.create_directory(path=root + "/archive")
"""


async def test_written_files_are_removed_by_deny_and_roll_back(client, tmp_path: Path) -> None:
    root, trash = tmp_path / "files", tmp_path / "trash"
    root.mkdir()
    trash.mkdir()
    async with mcp_worker(client, servers(root, trash)) as worker:
        request = CodeExecutionRequest(code=CODE, inputs={"root": str(root)})
        handle = await start_execution(client, request, task_queue=worker.task_queue)
        status = await wait_for_state(handle, "awaiting_approval", timeout=60)
        (pending,) = status.pending_approvals
        assert pending.tool == "mcp:fs/create_directory" and pending.can_undo is False
        assert [w.split(":")[0] for w in pending.would_compensate or []] == ["2", "1"]
        assert (root / "report.txt").read_text() == "draft"
        record = await handle.execute_update(
            "decide",
            Decision(call_id=pending.call_id, approve=False, by="ops", rollback=True),
            result_type=ApprovalRecord,
        )
        assert record.rollback
        outcome = await asyncio.wait_for(handle.result(), 60)
    assert not outcome.success
    assert [(e.tool, e.state) for e in outcome.undo.entries] == [
        ("mcp:fs/write_file", "compensated"),
        ("mcp:fs/write_file", "compensated"),
    ]
    assert sorted(p.name for p in root.iterdir()) == []
    assert sorted(p.name for p in trash.iterdir()) == ["1-report.txt", "2-summary.txt"]
    assert (trash / "1-report.txt").read_text() == "draft"
    assert not (root / "archive").exists()
