"""Durable code mode: run LLM-written Python in a sandbox, durably, on Temporal.

The public face. Each name is imported from its layer the first time it is used, so a
workflow that imports ``execute_code`` does not pull the worker's code into Temporal's
workflow sandbox, and ``import codemode`` costs nothing::

    from codemode import tool                           # your tools module
    from codemode import CodeModePlugin, connect        # your client and worker
    from codemode import CodeExecutionRequest, start_execution
    from codemode import execute_code, run_session_cell  # from your own workflow
    from codemode.pydantic_ai import DurableCodeMode     # the pydantic-ai capability

The layers underneath (``codemode.runtimes``, ``codemode.storage``, ``codemode.approvals``,
``codemode.activities``, ``codemode.workflows``, ``codemode.worker``, ``codemode.client``,
``codemode.integrations``, ``codemode.apps``) are importable too, for what the face does not
name (docs/concepts/architecture.md draws them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._version import __version__

if TYPE_CHECKING:
    from .activities.tools import current_call, tool
    from .client.executions import start_execution
    from .client.sessions import submit_cell
    from .worker.connection import connect
    from .worker.plugin import CodeModePlugin
    from .worker.worker import CodeModeWorker
    from .workflows.child_execution import execute_code
    from .workflows.child_session import run_session_cell
    from .workflows.models import CodeExecutionRequest, ExecutionOutcome

#: Public name -> the module that defines it.
_FACE: dict[str, str] = {
    "tool": "codemode.activities.tools",
    "current_call": "codemode.activities.tools",
    "CodeExecutionRequest": "codemode.workflows.models",
    "ExecutionOutcome": "codemode.workflows.models",
    "execute_code": "codemode.workflows.child_execution",
    "run_session_cell": "codemode.workflows.child_session",
    "CodeModePlugin": "codemode.worker.plugin",
    "CodeModeWorker": "codemode.worker.worker",
    "connect": "codemode.worker.connection",
    "start_execution": "codemode.client.executions",
    "submit_cell": "codemode.client.sessions",
}

__all__ = [
    "CodeExecutionRequest",
    "CodeModePlugin",
    "CodeModeWorker",
    "ExecutionOutcome",
    "__version__",
    "connect",
    "current_call",
    "execute_code",
    "run_session_cell",
    "start_execution",
    "submit_cell",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _FACE.get(name)
    if module is None:
        raise AttributeError(f"module 'codemode' has no attribute {name!r}")
    # ``__import__``, not ``importlib.import_module``: in workflow code, Temporal's sandbox
    # imports through ``__import__`` (its own, there), which applies its passthrough rules.
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
