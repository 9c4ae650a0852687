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
