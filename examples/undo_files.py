"""Undo, worked through (docs/guides/undo.md): a file written through the filesystem MCP server,
removed by a rollback. The server has no delete tool, so the config's compensation moves the file
the call wrote into a trash directory the server also serves (``move_file``), by the path the call
wrote to.

    python -m examples.undo_files      # with a server running, and npx (or CODEMODE_FS_SERVER)
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
import uuid
from pathlib import Path

from codemode import CodeExecutionRequest, CodeModeWorker, connect, start_execution
from codemode.activities import ToolRegistry
from codemode.activities.mcp_tools import McpServers
from codemode.client.undo import roll_back

#: How the filesystem server starts (the tests point it at their installed copy).
SERVER = os.environ.get("CODEMODE_FS_SERVER") or "npx -y @modelcontextprotocol/server-filesystem"


def config(files: Path, trash: Path) -> dict:
    command, *args = shlex.split(SERVER)
    return {
        "mcpServers": {
            "fs": {
                "command": command,
                "args": [*args, str(files), str(trash)],
                "tools": {
                    "settings": {
                        "write_file": {
                            "approval": "never",
                            "compensate": {
                                "tool": "move_file",
                                "arguments": {
                                    "source": "{args.path}",
                                    "destination": f"{trash}/{{call_id}}-{{args.path|basename}}",
                                },
                                "approval": "never",
                            },
                        }
                    }
                },
            }
        }
    }


async def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="undo-files-"))
    files, trash = root / "files", root / "trash"
    files.mkdir()
    trash.mkdir()
    client = await connect()
    queue = f"undo-{uuid.uuid4().hex[:6]}"
    async with McpServers(config(files, trash)) as mcp:
        worker = CodeModeWorker(client, ToolRegistry(), task_queue=queue, mcp=mcp)
        async with worker.running():
            code = 'fs.write_file(path=folder + "/report.md", content="# Q3\\nDraft")'
            request = CodeExecutionRequest(code=code, inputs={"folder": str(files)})
            outcome = await (await start_execution(client, request, task_queue=queue)).result()
            print("written:", sorted(p.name for p in files.iterdir()))
            undone = await roll_back(client, outcome.execution_id, by="ops", reason="not ready")
            print("rolled back:", [(e.tool, e.state) for e in undone.undo.entries])
    print("files:", sorted(p.name for p in files.iterdir()), "trash:", sorted(p.name for p in trash.iterdir()))


if __name__ == "__main__":
    asyncio.run(main())
