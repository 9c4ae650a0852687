"""The workflow sandbox, minus three costs that buy it nothing.

temporalio's ``SandboxedWorkflowRunner`` runs workflow code inside a sandbox (restricted
imports and calls, the workflow module imported afresh for every run): we keep all of that.
Three of its costs are not part of what it guarantees (measured under load, issue 11):

* **A serialization context per payload.** The SDK asks the sandboxed instance for one for
  every payload it visits (three passes when decoding an activation, three when encoding its
  completion, plus the external-storage context), and each question is an ``exec`` of a code
  string under the sandbox's import hooks (temporalio 1.35, ``workflow_sandbox/_runner.py``).
  The answer is a lookup in the SDK's own table of pending commands: no workflow code runs and
  nothing is imported. We ask the in-sandbox object directly.
* **Compiling the code strings it runs in the sandbox, every time.** Each activation, and
  each instance creation, is an ``exec`` of a short code string (``with
  __temporal_importer.applied(): ...``), which Python compiles anew on every call: about
  12 microseconds per activation (4% of one), one or two activations per tool call. We
  compile each string once and ``exec`` the code object: the same statements, in the same
  globals.
* **Compiling the workflow module for every run.** The sandbox executes the workflow module
  again for each run (that is the isolation), which normally reads its cached bytecode. Where
  no bytecode is written (``PYTHONDONTWRITEBYTECODE``, an editable install), Python compiles
  the source every time: milliseconds per execution for ``workflows/execution_workflow.py``. We
  keep the compiled code object in memory (like a ``.pyc``: keyed by the file's path, size and
  modification time), and the module still runs afresh. The same for the modules of its
  package the sandbox imports afresh with it (``codemode``, ``codemode.workflows``).

Code mode's own workflows (``CodeExecutionWorkflow``, the session and the sweep workflows)
run outside the sandbox (issue 40): the sandbox re-executed their module for every run and
proxied every call they made, about a third of the worker's Python time on a workflow
activation. The code is ours, small and deterministic; what the sandbox checked at run time
is checked by tests instead (``tests/workflows/test_determinism.py``: every workflow path
with no workflow cache, replay of the committed histories under this runner, and an import
check of ``workflows/``). ``CODEMODE_WORKFLOW_SANDBOX=1`` puts them back in the sandbox (to
look for a suspected non-determinism). Every other workflow on the worker stays sandboxed.

Workflow code, activations and instance creation go through the sandbox unchanged. If a later
SDK moves the internals this relies on (``_runner._Instance``, the in-sandbox object in its
globals), the runner falls back to the SDK's own path; ``tests/workflows/
test_workflow_runner.py`` says so when it happens.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import CodeType, ModuleType
from typing import Any

import temporalio.workflow
from temporalio.worker import UnsandboxedWorkflowRunner, WorkflowInstance
from temporalio.worker._workflow_instance import WorkflowInstanceDetails
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

#: Set to 1 to run code mode's own workflows in the SDK's sandbox too.
SANDBOX_ENV = "CODEMODE_WORKFLOW_SANDBOX"

try:
    from temporalio.worker.workflow_sandbox._runner import _Instance as _SandboxInstance
except ImportError:  # pragma: no cover - a later SDK reorganised its sandbox
    _SandboxInstance = None

#: The SDK's sandbox code strings (a handful: activate, create, the context lookups), compiled.
_sandbox_code: dict[str, CodeType] = {}

#: The name under which the SDK keeps the in-sandbox object in the instance's globals.
_IN_SANDBOX = "__temporal_in_sandbox"


if _SandboxInstance is not None:

    class _Instance(_SandboxInstance):  # type: ignore[misc, valid-type]
        def _in_sandbox(self) -> Any:
            scope = getattr(self, "globals_and_locals", None)  # an SDK that moved it: the SDK's path
            return scope.get(_IN_SANDBOX) if isinstance(scope, dict) else None

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

        def _run_code(self, code: str, **extra_globals: Any) -> None:
            # The SDK's own body, which passes the string to ``exec``: a code object does the same.
            compiled = _sandbox_code.get(code)
            if compiled is None:
                compiled = _sandbox_code.setdefault(code, compile(code, "<string>", "exec"))
            super()._run_code(compiled, **extra_globals)  # type: ignore[arg-type]

        def get_external_store_context(self, command_info: Any) -> Any:
            return self._ask("get_external_store_context", command_info)


def our_workflows() -> tuple[type, ...]:
    """The workflow classes code mode defines (the ones this runner runs unsandboxed)."""
    from codemode.workflows.execution_workflow import CodeExecutionWorkflow
    from codemode.workflows.session_workflow import CodeSessionWorkflow
    from codemode.workflows.sweep_workflow import StorageSweepWorkflow

    return (CodeExecutionWorkflow, CodeSessionWorkflow, StorageSweepWorkflow)


def ours_sandboxed() -> bool:
    """Whether ``CODEMODE_WORKFLOW_SANDBOX`` asks for our workflows in the sandbox."""
    value = os.environ.get(SANDBOX_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"{SANDBOX_ENV}={value!r}: expected 1 or 0")


class CodeModeWorkflowRunner(SandboxedWorkflowRunner):
    """``SandboxedWorkflowRunner`` (same restrictions, same per-run module isolation) whose
    per-payload context lookups do not re-enter the sandbox and whose workflow modules and
    sandbox code strings are compiled once per process; code mode's own workflows run outside
    it (unless ``CODEMODE_WORKFLOW_SANDBOX=1``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._plain = UnsandboxedWorkflowRunner()
        self._unsandboxed = () if ours_sandboxed() else our_workflows()

    def runs_unsandboxed(self, defn: temporalio.workflow._Definition) -> bool:
        return defn.cls in self._unsandboxed

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        if self.runs_unsandboxed(defn):
            self._plain.prepare_workflow(defn)
            return
        # The workflow module, and every module of its top-level package that the sandbox
        # imports afresh for each run with it (``codemode``, ``codemode.workflows``,
        # ``codemode._version``: about a millisecond per execution).
        _compiled_once.add(defn.cls.__module__.split(".")[0], package=True)
        _compiled_once.add(defn.cls.__module__)
        super().prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        if self.runs_unsandboxed(det.defn):
            return self._plain.create_instance(det)
        if _SandboxInstance is None:
            return super().create_instance(det)
        return _Instance(det, self.runner_class, self.restrictions)


#: Compiled workflow modules: path -> (size, modification time, code object).
_codes: dict[str, tuple[int, int, CodeType]] = {}


class _CompiledOnceLoader(importlib.machinery.SourceFileLoader):
    """A source loader that compiles a file once per process (again when it changes)."""

    def get_code(self, fullname: str) -> CodeType:
        st = os.stat(self.path)
        hit = _codes.get(self.path)
        if hit is not None and hit[:2] == (st.st_size, st.st_mtime_ns):
            return hit[2]
        code = super().get_code(fullname)
        assert code is not None
        _codes[self.path] = (st.st_size, st.st_mtime_ns, code)
        return code


class _CompiledOnceFinder(importlib.abc.MetaPathFinder):
    """Finds the named modules where Python would, with ``_CompiledOnceLoader`` as loader."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        #: Top-level packages all of whose modules are compiled once.
        self.packages: set[str] = set()

    def add(self, name: str, *, package: bool = False) -> None:
        if name in ("__main__", "__temporal_main__"):
            return  # the SDK loads a workflow defined in __main__ its own way
        (self.packages if package else self.names).add(name)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names and fullname.split(".")[0] not in self.packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or type(spec.loader) is not importlib.machinery.SourceFileLoader or not spec.origin:
            return spec
        spec.loader = _CompiledOnceLoader(fullname, spec.origin)
        return spec


_compiled_once = _CompiledOnceFinder()
