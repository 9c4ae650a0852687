"""The commands a person is shown to decide a waiting call (``codemode approve ...``,
``codemode deny ...``), written once for every door that shows them: the CLI's lines and
``--json``, the MCP front's reports and questions, the framework adapters' deferred calls,
and the signing hints. (The workflow's memo writes its own, in ``workflows/approvals.py``.)"""

from __future__ import annotations

from typing import Literal


def decide_command(
    verb: Literal["approve", "deny"], execution_id: str, call_id: str, *, signed: bool = False, flags: str = ""
) -> str:
    """``codemode approve ID CALL [--by NAME][ --address ...]``: ``signed``, the call needs a
    signed decision (an approvers file: NAME's key signs it); ``flags``, the connection flags
    (``Target.flags()``)."""
    by = " --by NAME" if signed else ""
    return f"codemode {verb} {execution_id} {call_id}{by}{flags}"


def decide_all_hint(execution_id: str) -> str:
    """How a person decides every call an execution waits on, signed."""
    return f"{decide_command('approve', execution_id, '--all', signed=True)} (or codemode deny ...)"
