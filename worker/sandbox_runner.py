"""The workflow sandbox, minus one cost per payload that buys it nothing.

temporalio's ``SandboxedWorkflowRunner`` runs workflow code inside a sandbox (restricted
imports and calls, fresh module state per run): we keep all of that. But the SDK also asks the
sandboxed instance for a serialization context for every payload it visits (three passes
when decoding an activation, three when encoding its completion, plus the external-storage
context), and each of those questions is an ``exec`` of a code string under the sandbox's
import hooks (temporalio 1.35, ``workflow_sandbox/_runner.py``). The answer is a lookup in
the SDK's own table of pending commands: no workflow code runs and nothing is imported. We
ask the in-sandbox object directly. Workflow code, activations and instance creation still
go through the sandbox unchanged.

Measured with ``bench/temporal_steps.py`` (issue 11): see the README's benchmark section.
If a later SDK moves the internals this relies on (``_runner._Instance``, the in-sandbox object
in its globals), the runner falls back to the SDK's own path; ``tests/workflows/
test_sandbox_runner.py`` says so when it happens.
"""

from __future__ import annotations

from typing import Any

import temporalio.workflow
from temporalio.worker import WorkflowInstance
from temporalio.worker._workflow_instance import WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

try:
    from temporalio.worker.workflow_sandbox._runner import _Instance as _SandboxInstance
except ImportError:  # pragma: no cover - a later SDK reorganised its sandbox
    _SandboxInstance = None

#: The name under which the SDK keeps the in-sandbox object in the instance's globals.
_IN_SANDBOX = "__temporal_in_sandbox"


if _SandboxInstance is not None:

    class _Instance(_SandboxInstance):  # type: ignore[misc, valid-type]
        def _in_sandbox(self) -> Any:
            return self.globals_and_locals.get(_IN_SANDBOX)

        def _ask(self, method: str, command_info: Any) -> Any:
            target = self._in_sandbox()
            if target is None:
                return getattr(super(), method)(command_info)
            self.importer.restriction_context.is_runtime = True
            temporalio.workflow.unsafe._set_in_sandbox(True)
            try:
                return getattr(target, method)(command_info)
            finally:
                temporalio.workflow.unsafe._set_in_sandbox(False)
                self.importer.restriction_context.is_runtime = False

        def get_serialization_context(self, command_info: Any) -> Any:
            return self._ask("get_serialization_context", command_info)

        def get_external_store_context(self, command_info: Any) -> Any:
            return self._ask("get_external_store_context", command_info)


class CodeModeWorkflowRunner(SandboxedWorkflowRunner):
    """``SandboxedWorkflowRunner`` (same restrictions, same per-run module isolation) whose
    per-payload context lookups do not re-enter the sandbox."""

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        if _SandboxInstance is None:
            return super().create_instance(det)
        return _Instance(det, self.runner_class, self.restrictions)
