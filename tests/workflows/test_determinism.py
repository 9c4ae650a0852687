"""What makes up for running code mode's own workflows outside the SDK's sandbox (issue 40,
``worker/workflow_runner.py``): the sandbox re-imported their modules per run and refused
non-deterministic calls at run time; these check the same things ahead of time.

* Every workflow path runs on a worker that keeps no workflow in its cache
  (``max_cached_workflows=0``), so every workflow task replays the run's whole history from
  the start: any difference between the first run and a replay is a workflow task failure.
* The committed histories (executions and sessions) replay under the runner the plugin picks.
* The workflow modules import nothing that reads the clock, randomness, the environment, the
  network, threads or files, and call no such thing (an AST check of ``workflows/*.py``).
"""

from __future__ import annotations

import ast
import os
import uuid
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer, Worker

from codemode.activities import ToolRegistry
from codemode.client.sessions import close_session, run_cell
from codemode.worker.plugin import CodeModePlugin
from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.session_workflow import CodeSessionWorkflow
from tests.sessions.session_parent import SessionParentWorkflow
from tests.sessions.test_session_replay import HISTORIES as SESSION_HISTORIES
from tests.sessions.test_session_replay import _histories
from tests.workflows.conftest import TOOLS_MODULE
from tests.workflows.test_replay import HISTORIES, PYTHON_SCENARIOS, _aiter, _record

WORKFLOWS_DIR = Path(__file__).resolve().parents[2] / "workflows"

#: Modules a workflow module may not import: each reads the clock, randomness, the process's
#: environment, the network, threads or files (``temporalio.workflow`` has the deterministic
#: versions: ``workflow.now()``, ``workflow.random()``, ``workflow.uuid4()``, timers).
FORBIDDEN_MODULES = frozenset(
    {
        "time",
        "random",
        "secrets",
        "uuid",
        "os",
        "sys",
        "socket",
        "ssl",
        "select",
        "selectors",
        "threading",
        "multiprocessing",
        "concurrent",
        "subprocess",
        "signal",
        "io",
        "pathlib",
        "shutil",
        "tempfile",
        "glob",
        "urllib",
        "http",
        "requests",
        "httpx",
        "aiohttp",
        "sqlite3",
        "logging",
        "importlib",
        "ctypes",
        "mmap",
        "resource",
        "platform",
        "getpass",
        "locale",
        "temporalio.worker.workflow_sandbox",
        "temporalio.client",
        "temporalio.activity",
        "codemode.runtimes.monty",
        "codemode.runtimes.python",
        "codemode.activities.sandbox_steps",
        "codemode.storage",
    }
)
#: Calls a workflow module may not make, whatever it imported: (object, attribute).
FORBIDDEN_CALLS = frozenset(
    {
        ("datetime", "now"),
        ("datetime", "utcnow"),
        ("datetime", "today"),
        ("date", "today"),
        ("asyncio", "get_event_loop"),
        ("asyncio", "new_event_loop"),
        ("asyncio", "to_thread"),
        ("asyncio", "create_subprocess_exec"),
        ("asyncio", "create_subprocess_shell"),
        ("asyncio", "open_connection"),
    }
)
FORBIDDEN_BUILTINS = frozenset({"open", "input", "print", "exec", "eval", "__import__", "id", "hash"})


def _forbidden(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)


def _parse(path: Path) -> ast.Module:
    """``ast.parse``, again when CPython 3.11's AST conversion trips on another thread's parse
    ("AST constructor recursion depth mismatch", gh-106905: its depth counter is shared)."""
    for _ in range(5):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError as err:
            if "recursion depth mismatch" not in str(err):
                raise
    return ast.parse(path.read_text(), str(path))


def _problems(path: Path) -> list[str]:
    tree = _parse(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno} import {a.name}" for a in node.names if _forbidden(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            if any(_forbidden(n) for n in names):
                found.append(f"{path.name}:{node.lineno} from {node.module} import ...")
        elif isinstance(node, ast.Call):
            f = node.func
            if (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and (f.value.id, f.attr) in FORBIDDEN_CALLS
            ):
                found.append(f"{path.name}:{node.lineno} {f.value.id}.{f.attr}()")
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_BUILTINS:
                found.append(f"{path.name}:{node.lineno} {f.id}()")
    return found


def test_workflow_modules_import_nothing_non_deterministic() -> None:
    files = sorted(WORKFLOWS_DIR.glob("*.py"))
    assert len(files) > 5
    assert [p for f in files for p in _problems(f)] == []


def test_the_import_check_catches_what_the_sandbox_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import random\nfrom os import environ\nfrom datetime import datetime\nimport time as t\n"
        "def f():\n    return datetime.now(), open('x'), random.random()\n"
    )
    problems = "\n".join(_problems(bad))
    for what in ("import random", "from os import", "import time", "datetime.now()", "open()"):
        assert what in problems


async def _no_failed_tasks(histories: dict[str, WorkflowHistory]) -> None:
    failed = {
        name: [str(e.workflow_task_failed_event_attributes.failure.message)]
        for name, h in histories.items()
        for e in h.events
        if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    }
    assert failed == {}


def _events(history: WorkflowHistory) -> list[str]:
    return [f"{e.event_id}:{EventType.Name(e.event_type).removeprefix('EVENT_TYPE_')}" for e in history.events]


@pytest.fixture
async def uncached_worker(client: Client, task_queue: str):
    """A worker that keeps no workflow cached: every workflow task replays from the start."""
    plugin = CodeModePlugin(ToolRegistry.from_module(TOOLS_MODULE))
    worker = Worker(client, task_queue=task_queue, plugins=[plugin], max_cached_workflows=0)
    async with worker:
        yield worker


@pytest.mark.slow
async def test_every_execution_path_with_no_workflow_cache(client, task_queue, uncached_worker, events_file) -> None:
    histories = await _record(client, task_queue)
    histories.update(
        {f"python-{k}": v for k, v in (await _record(client, task_queue, "python", PYTHON_SCENARIOS)).items()}
    )
    await _no_failed_tasks(histories)
    results = await Replayer(
        workflows=[CodeExecutionWorkflow],
        data_converter=client.data_converter,
        workflow_runner=CodeModeWorkflowRunner(),
    ).replay_workflows(_aiter(histories.values()), raise_on_replay_failure=False)
    names = {h.events[0].workflow_execution_started_event_attributes.original_execution_run_id: n for n, h in histories.items()}
    failed = {names.get(rid, rid): str(err) for rid, err in results.replay_failures.items()}
    if failed and (keep := os.environ.get("CODEMODE_KEEP_FAILED_HISTORIES")):
        for name in failed:
            Path(keep, f"{name}.json").write_text(histories[name].to_json())
    # A failure shows each failed history's events (CI keeps nothing else of the run).
    assert not failed, {name: (err, _events(histories[name])) for name, err in failed.items()}


@pytest.mark.slow
async def test_session_paths_with_no_workflow_cache(client, task_queue, uncached_worker, events_file) -> None:
    name = f"nocache-{uuid.uuid4().hex[:6]}"
    await run_cell(client, name, "acc = [slow_step(1, 0)]", task_queue=task_queue)
    await run_cell(client, name, "acc.append(2)\nraise ValueError('kept anyway')", task_queue=task_queue)
    await run_cell(client, name, "fresh = 1", restart=True, task_queue=task_queue)
    await run_cell(client, name, "len(acc) if 'acc' in dir() else fresh", task_queue=task_queue)
    await close_session(client, name)
    histories = {f"run{i}": h for i, h in enumerate(await _histories(client, f"session:{name}"))}
    for n in range(1, 5):
        (histories[f"cell{n}"],) = await _histories(client, f"session:{name}:{n}")
    await _no_failed_tasks(histories)


async def test_committed_histories_replay_under_the_plugins_runner(converter) -> None:
    files = sorted(HISTORIES.glob("*.json")) + sorted(SESSION_HISTORIES.glob("*.json"))
    histories = [WorkflowHistory.from_json(f.stem, f.read_text()) for f in files]
    replayer = Replayer(
        workflows=[CodeExecutionWorkflow, CodeSessionWorkflow, SessionParentWorkflow],
        data_converter=converter,
        workflow_runner=CodeModeWorkflowRunner(),
    )
    results = await replayer.replay_workflows(_aiter(histories), raise_on_replay_failure=False)
    assert results.replay_failures == {}


# -- what an unsandboxed workflow must not do (issue 43) ----------------------------------------

#: Where a local activity may be started from a coroutine the run starts itself (a task or a
#: gather): each says why no other local activity can be in flight then. Everywhere else a local
#: activity is the main coroutine's, one at a time.
CONCURRENT_LA_ALLOWED = {
    # Parking's release-after-grace task: only a runtime whose parked sandbox holds compute
    # parks, and those runtimes' steps are regular activities (Monty's, the local ones, never park).
    ("parking.py", "_release_after"): "runs only for runtimes whose steps are regular activities",
    # The notice's start: a regular activity in runs of the current generation; the local
    # activity (``Notices._start``) only replays runs recorded before it.
    ("approval_notices.py", "start"): "a regular activity since generation-43; LA only replaying older runs",
    # A session's cell runs in a task the session loop awaits alone (``workflow.wait([cell])``):
    # a cancellation reaches the loop, not the cell's child. Nothing else runs meanwhile.
    ("session_workflow.py", "_run_and_answer"): "the session loop awaits the cell task alone",
}


def _functions() -> dict[str, dict[str, ast.AST]]:
    """file -> function name -> its definition, for every workflow module."""
    return {
        path.name: {n.name: n for n in ast.walk(_parse(path)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        for path in sorted(WORKFLOWS_DIR.glob("*.py"))
    }


def _called(node: ast.AST) -> set[str]:
    """Names of the functions and methods ``node`` calls itself (``f()``, ``x.f()`` -> ``f``);
    not what it hands to a task or a gather (checked where it is handed over)."""
    names = set()
    todo = [node]
    while todo:
        for child in ast.iter_child_nodes(todo.pop()):
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                names.add(name)
                if name in ("create_task", "gather"):
                    continue
            todo.append(child)
    return names - {""}


def _starts_local_activities(functions: dict[str, dict[str, ast.AST]]) -> set[str]:
    """Names of the functions that start a local activity, themselves or through another (by
    name, across the workflow modules: a name shared by two functions counts for both)."""
    calls = {name: _called(fn) for mod in functions.values() for name, fn in mod.items()}
    tainted = {name for name, called in calls.items() if "execute_local_activity" in called}
    while True:
        more = {name for name, called in calls.items() if called & tainted} - tainted
        if not more:
            return tainted
        tainted |= more


def _concurrent_starts(path: Path) -> list[tuple[str, str, int]]:
    """(file, callee, line) of every coroutine handed to ``asyncio.create_task``/``gather``."""
    found = []
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("create_task", "gather"):
            for arg in node.args:
                inner = arg.value if isinstance(arg, ast.Starred) else arg
                calls = [c for c in ast.walk(inner) if isinstance(c, ast.Call)]
                for c in calls[:1]:
                    f = c.func
                    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else "?"
                    found.append((path.name, name, node.lineno))
    return found


def test_local_activities_start_from_the_main_coroutine_only() -> None:
    """The SDK resolves local activities in completion order on a first execution and in sequence
    order on replay (sdk-python #1578): two in flight from two coroutines can resume them in
    another order. No coroutine a workflow starts itself (a task, a gather) may reach one, except
    where ``CONCURRENT_LA_ALLOWED`` says why none other can be in flight."""
    functions = _functions()
    tainted = _starts_local_activities(functions)
    assert {"run_step", "load_state", "save_state", "release_sandbox"} <= tainted
    bad = [
        f"{file}:{line} {callee}(...) runs in a task or gather and starts a local activity"
        for path in sorted(WORKFLOWS_DIR.glob("*.py"))
        for file, callee, line in _concurrent_starts(path)
        if (callee in tainted or callee not in {n for mod in functions.values() for n in mod})
        and (file, callee) not in CONCURRENT_LA_ALLOWED
        and callee not in ("gather",)
    ]
    assert bad == []
    # Handlers run beside the main coroutine too: none may start a local activity.
    handlers = [
        f"{path.name}: {fn.name}"
        for path in sorted(WORKFLOWS_DIR.glob("*.py"))
        for fn in ast.walk(_parse(path))
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
        and any(ast.unparse(d).split("(")[0].endswith((".signal", ".update", ".query")) for d in fn.decorator_list)
        and _called(fn) & tainted
    ]
    assert handlers == []


def test_patches_are_read_in_the_first_activation_only() -> None:
    """``workflow.patched`` answers from the markers of the task being replayed: called after a
    local activity it can answer differently on replay (``workflows/versions.py``). Only
    ``Versions`` calls it, and a workflow that has versions reads them first in its ``__init__``."""
    calls = [
        f"{path.name}:{node.lineno}"
        for path in sorted(WORKFLOWS_DIR.glob("*.py"))
        for node in ast.walk(_parse(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("patched", "deprecate_patch")
    ]
    assert all(c.startswith("versions.py:") for c in calls), calls
    for path in sorted(WORKFLOWS_DIR.glob("*.py")):
        for cls in (n for n in ast.walk(_parse(path)) if isinstance(n, ast.ClassDef)):
            uses = "self._versions" in ast.unparse(cls)
            init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if uses:
                assert init is not None, f"{path.name}: {cls.name} has no __init__ to read its versions in"
                first = [ast.unparse(s) for s in init.body[:2]]
                assert "self._versions.begin()" in first, f"{path.name}: {cls.name}.__init__ starts {first}"


_MUTABLE = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
_MUTABLE_CALLS = {"list", "dict", "set", "defaultdict", "deque", "Counter", "OrderedDict", "bytearray"}


def _mutable(value: ast.AST | None) -> bool:
    if isinstance(value, _MUTABLE):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        return (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) in _MUTABLE_CALLS
    return False


def _shared_state(path: Path) -> list[str]:
    """Mutable values at module level or as class attributes: unsandboxed, a module is imported
    once per worker, so such a value is shared by every run of every workflow on it."""
    found = []
    tree = _parse(path)
    scopes = [tree.body, *(c.body for c in tree.body if isinstance(c, ast.ClassDef))]
    for body in scopes:
        for node in body:
            value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
            if _mutable(value):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)[:80]}")
    return found


def test_no_state_shared_between_runs() -> None:
    assert [p for f in sorted(WORKFLOWS_DIR.glob("*.py")) for p in _shared_state(f)] == []


def test_the_lints_catch_what_they_are_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("SEEN = {}\nclass W:\n    calls = []\n    def f(self):\n        return 1\n")
    assert len(_shared_state(bad)) == 2
    lint = tmp_path / "la.py"
    lint.write_text("import asyncio\nasync def a(x):\n    asyncio.create_task(b(x))\n    await asyncio.gather(*(b(i) for i in x))\n")
    assert [(c, line) for _, c, line in _concurrent_starts(lint)] == [("b", 3), ("b", 4)]
