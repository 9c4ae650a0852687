"""What ``run_code`` gives back to the model (seed 002's shape), and which failures are a
retry prompt instead (seed 003, decision 5).

* A syntax error, or a type error against the tool stubs, means the code never ran: the model
  should fix it, so it is a ``ModelRetry`` naming the line (it counts against the tool's
  retries).
* Anything that happened while the code ran (an exception, a tool error it did not catch, a
  denied call, a timeout) is the tool's return with ``success: false``: the model sees what
  ran, the output so far and which calls were made.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import ModelRetry
from typing_extensions import TypedDict

from codemode.workflows.models import ErrorInfo, ExecutionOutcome

#: How many tool calls the return lists (the rest are counted): the audit has them all.
CALLS_SHOWN = 20
#: Errors the model fixes by rewriting the code: the code did not run.
RETRY_KINDS = frozenset({"syntax", "type"})


class ErrorReturn(TypedDict):
    type: str
    message: str
    line: int | None


class CallReturn(TypedDict):
    tool: str
    summary: str
    status: str


class ArtifactReturn(TypedDict):
    name: str
    mime_type: str
    size: int


class RunCodeReturn(TypedDict, total=False):
    success: bool
    output: Any
    stdout: str
    error: ErrorReturn | None
    execution_id: str
    tool_calls: list[CallReturn]
    more_tool_calls: int
    duration_ms: float
    #: Files the code handed back (``save_artifact``, the outputs directory); images among
    #: them follow the return as content the model can see (``artifacts.py``).
    artifacts: list[ArtifactReturn]
    #: With a session: its name and this call's cell number in it.
    session: str
    cell: int
    #: Something the model must know beyond the outcome (its session had closed, so this
    #: call started from a fresh namespace).
    notice: str


#: The checker's diagnostic (the code excerpt, expected and found types) is kept up to this size.
DIAGNOSTIC_CHARS = 2000


def retry_message(error: ErrorInfo) -> str:
    """What a model is told when its code did not run: the error, where, the checker's own
    diagnostic when there is one (``Expected `int`, found `str` ``), and what to do."""
    where = f" (line {error.line})" if error.line else ""
    text = f"{error.type}{where}: {error.message}"
    detail = (error.traceback or "").strip()
    if detail and detail != error.message:
        text += "\n" + detail[:DIAGNOSTIC_CHARS]
    return text + "\nFix the code and call the tool again."


def run_code_return(
    outcome: ExecutionOutcome,
    *,
    retry: bool = True,
    session: str | None = None,
    cell: int | None = None,
    notice: str | None = None,
) -> RunCodeReturn:
    """The tool's return for ``outcome``; raises ``ModelRetry`` for code that did not run when
    ``retry`` (a result handed back later, with ``deferred_results``, never retries). A cell
    of a session says which (``session``, ``cell``); a cell that did not run changed nothing
    in its session."""
    error = outcome.error
    if retry and error is not None and not outcome.success and error.kind in RETRY_KINDS:
        message = retry_message(error)
        if notice:
            message = f"{notice}\n{message}"
        raise ModelRetry(message)
    calls = outcome.tool_calls
    shown: RunCodeReturn = {
        "success": outcome.success,
        "output": outcome.output,
        "stdout": outcome.stdout,
        "error": None if error is None else {"type": error.type, "message": error.message, "line": error.line},
        "execution_id": outcome.execution_id,
        "tool_calls": [{"tool": c.tool, "summary": c.summary, "status": c.status} for c in calls[:CALLS_SHOWN]],
        "duration_ms": round(outcome.duration_ms, 1),
    }
    if len(calls) > CALLS_SHOWN:
        shown["more_tool_calls"] = len(calls) - CALLS_SHOWN
    if outcome.artifacts:
        shown["artifacts"] = [{"name": a.name, "mime_type": a.mime_type, "size": a.size} for a in outcome.artifacts]
    if session is not None:
        shown["session"] = session
    if cell is not None:
        shown["cell"] = cell
    if notice:
        shown["notice"] = notice
    return shown
