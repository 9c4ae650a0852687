"""The runtime layer imports without its vendors: pydantic-monty is needed only by
codemode.runtimes.monty, and its absence is an ImportError that says what to install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Runs in a fresh interpreter where importing pydantic_monty fails as if it were not installed.
PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoMonty(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pydantic_monty" or name.startswith("pydantic_monty."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoMonty())

    from codemode.runtimes import (
        CodeRuntime, CodeExecution, FunctionCall, ExecutionResult, CodeConstraints,
        CodeExecutionError, CodeSyntaxError, CodeTypeError, CodeRuntimeError,
    )
    report = {"imported": True, "vendors_loaded": sorted(m for m in ("pydantic_monty", "temporalio") if m in sys.modules)}
    try:
        from codemode.runtimes.monty import MontyRuntime
    except ImportError as err:
        report["monty_error"] = str(err)
    try:
        from codemode.runtimes import get_runtime
        get_runtime("monty")
    except ImportError as err:
        report["get_runtime_error"] = str(err)
    print(json.dumps(report))
    """
)


def test_runtimes_import_without_pydantic_monty() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["imported"]
    assert report["vendors_loaded"] == []  # neither Monty nor Temporal is pulled in by `import runtimes`
    for key in ("monty_error", "get_runtime_error"):
        message = report[key]
        assert "pip install 'pydantic-monty" in message
        assert "monty-python" in message  # the look-alike PyPI name is called out


#: The same for the E2B SDK: codemode.runtimes.e2b alone needs it.
E2B_PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoE2B(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("e2b", "e2b_code_interpreter"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoE2B())
    from codemode import runtimes
    report = {"vendors_loaded": sorted(m for m in ("e2b", "e2b_code_interpreter") if m in sys.modules)}
    try:
        runtimes.get_runtime("e2b", api_key="x")
    except ImportError as err:
        report["error"] = str(err)
    print(json.dumps(report))
    """
)


def test_runtimes_import_without_the_e2b_sdk() -> None:
    proc = subprocess.run([sys.executable, "-c", E2B_PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["vendors_loaded"] == []
    assert "pip install 'e2b-code-interpreter" in report["error"]
