"""A session as a Jupyter notebook: one code cell per cell of the session, written with
``nbformat`` (Jupyter's own library) and validated against the notebook schema.

Each cell's execution keeps its own audit in its Temporal history (``client/histories/audit.py``),
so the notebook is built from those: the code, what it printed (a ``stream`` output), its
value (``execute_result``) or its error (``error``, with the traceback), and under the
cell's ``metadata.codemode`` the execution id, state, what the cell did to the session,
and every tool call (tool, arguments, status, result or error, attempts, approval).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

try:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "codemode session export --ipynb needs nbformat: pip install 'durable-codemode[notebook]'"
    ) from exc
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from codemode.client.histories.audit import ExecutionAudit, fetch_audit
from codemode.workflows.session_models import SessionStatus, cell_execution_id


async def session_audits(client: Client, status: SessionStatus) -> list[tuple[int, ExecutionAudit | None]]:
    """Every cell's audit, in order (None for a cell that never ran)."""
    audits: list[tuple[int, ExecutionAudit | None]] = []
    for index in range(1, status.cells + 1):
        try:
            audits.append((index, await fetch_audit(client, cell_execution_id(status.name, index))))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            audits.append((index, None))
    return audits


def build_notebook(status: SessionStatus, audits: list[tuple[int, ExecutionAudit | None]]) -> Any:
    nb = new_notebook(
        metadata={
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
            "codemode": {"session": status.name, "runtime": status.runtime, "cells": status.cells},
        }
    )
    for index, audit in audits:
        if audit is None:
            nb.cells.append(new_markdown_cell(f"*Cell {index} of session `{status.name}` never ran.*"))
            continue
        outputs = []
        if audit.stdout:
            outputs.append(new_output("stream", name="stdout", text=audit.stdout))
        if audit.success and audit.output is not None:
            outputs.append(
                new_output("execute_result", data={"text/plain": _plain(audit.output)}, execution_count=index)
            )
        if audit.error is not None:
            trace = (audit.error.traceback or f"{audit.error.type}: {audit.error.message}").splitlines()
            outputs.append(new_output("error", ename=audit.error.type, evalue=audit.error.message, traceback=trace))
        calls = [
            {
                "call_id": c.call_id,
                "tool": c.tool,
                "args": c.args,
                "kwargs": c.kwargs,
                "status": c.status,
                "result": c.result,
                "error": c.error.model_dump(mode="json") if c.error else None,
                "attempts": c.attempts,
                "approval": c.approval.model_dump(mode="json") if c.approval else None,
            }
            for c in audit.calls
        ]
        meta = {
            "codemode": json.loads(
                json.dumps(
                    {
                        "execution_id": audit.execution_id,
                        "state": audit.status,
                        "success": audit.success,
                        "tool_calls": calls,
                    },
                    default=repr,
                )
            )
        }
        nb.cells.append(new_code_cell(source=audit.code, execution_count=index, outputs=outputs, metadata=meta))
    nbformat.validate(nb)
    return nb


async def export_ipynb(client: Client, status: SessionStatus, path: str | Path) -> int:
    """Write the session as a notebook at ``path`` (validated); returns the cell count."""
    nb = build_notebook(status, await session_audits(client, status))
    nbformat.write(nb, str(path))
    return len(nb.cells)


def _plain(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, default=repr)
    except (TypeError, ValueError):
        return repr(value)
