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

from pydantic_ai import ModelRetry

from codemode.integrations.run_code import (
    CALLS_SHOWN,
    DIAGNOSTIC_CHARS,
    RETRY_KINDS,
    ArtifactReturn,
    CallReturn,
    ErrorReturn,
    RunCodeReturn,
    retry_message,
    run_code_result,
)
from codemode.workflows.models import ExecutionOutcome

__all__ = [
    "CALLS_SHOWN",
    "DIAGNOSTIC_CHARS",
    "RETRY_KINDS",
    "ArtifactReturn",
    "CallReturn",
    "ErrorReturn",
    "RunCodeReturn",
    "retry_message",
    "run_code_return",
]


def run_code_return(
    outcome: ExecutionOutcome,
    *,
    retry: bool = True,
    session: str | None = None,
    cell: int | None = None,
    notice: str | None = None,
) -> RunCodeReturn:
    """The tool's return for ``outcome`` (``codemode.integrations.run_code.run_code_result``);
    raises ``ModelRetry`` for code that did not run when ``retry`` (a result handed back later,
    with ``deferred_results``, never retries). A cell of a session says which (``session``,
    ``cell``); a cell that did not run changed nothing in its session."""
    error = outcome.error
    if retry and error is not None and not outcome.success and error.kind in RETRY_KINDS:
        message = retry_message(error)
        if notice:
            message = f"{notice}\n{message}"
        raise ModelRetry(message)
    return run_code_result(outcome, session=session, cell=cell, notice=notice, fix_hint=False)
