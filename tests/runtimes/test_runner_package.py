"""The runner as a package shipped as one zip (``runtimes/runner/package.py``): built the same
way every time, named in checkpoints by its hash, small files, standard library only, and a
program that a bare ``python -I runner.zip`` runs the way the runtimes run it."""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from codemode.runtimes.runner import package
from codemode.runtimes.runner.package import build_zip, compiled_runner, launch_args, runner_files, runner_zip
from codemode.runtimes.runner.sandbox_run import CHECKPOINT_VERSION, RUNNER_ZIP
from codemode.runtimes.wasm.snapshot import guest_modules

MAX_LINES = 400


def test_the_zip_is_built_deterministically() -> None:
    first, second = build_zip(runner_files()), build_zip(dict(reversed(list(runner_files().items()))))
    assert first == second == runner_zip() == RUNNER_ZIP
    archive = zipfile.ZipFile(__import__("io").BytesIO(first))
    names = archive.namelist()
    assert names == sorted(names) and names[0] == "__main__.py"
    assert {n.split("/")[0] for n in names} == {"__main__.py", package.PACKAGE}
    for info in archive.infolist():  # nothing of the machine that built it
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.compress_type == zipfile.ZIP_STORED and info.create_system == 3
        assert info.external_attr == 0o100644 << 16
    # What the zip holds is the files on disk: the entry point and every module of the package.
    assert archive.read("__main__.py") == package.RUNNER_PATH.read_bytes()
    on_disk = {p.name for p in package.PACKAGE_DIR.glob("*.py")}
    assert {n.split("/", 1)[1] for n in names if n.startswith(package.PACKAGE + "/")} == on_disk


def test_the_zip_is_the_same_from_files_with_other_times_and_modes(tmp_path: Path) -> None:
    """A checkout elsewhere (other mtimes, modes, directory order) builds the same bytes."""
    copy = tmp_path / "sandbox"
    copy.mkdir()
    for path in sorted(package.PACKAGE_DIR.glob("*.py"), reverse=True):
        target = copy / path.name
        target.write_bytes(path.read_bytes())
        os.chmod(target, 0o600)
        os.utime(target, (1_000_000_000, 1_000_000_000))
    entry = tmp_path / "in_sandbox.py"
    entry.write_bytes(package.RUNNER_PATH.read_bytes())
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(package, "PACKAGE_DIR", copy)
        mp.setattr(package, "RUNNER_PATH", entry)
        assert build_zip(runner_files()) == runner_zip()
    finally:
        mp.undo()


def test_the_checkpoint_version_is_the_zips_hash() -> None:
    assert CHECKPOINT_VERSION == "1-" + hashlib.sha256(runner_zip()).hexdigest()[:12]


def test_no_file_of_the_runner_is_long() -> None:
    for name, data in runner_files().items():
        lines = data.decode().count("\n")
        assert lines <= MAX_LINES, f"{name} has {lines} lines (at most {MAX_LINES})"


def test_the_runner_is_standard_library_only_and_python_3_9() -> None:
    stdlib = set(sys.stdlib_module_names)
    for name, data in runner_files().items():
        tree = ast.parse(data.decode(), filename=name, feature_version=(3, 9))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            for top in tops:
                assert top in stdlib or top == package.PACKAGE, f"{name} imports {top}"


def test_pyodide_unpacks_the_same_package() -> None:
    modules = guest_modules()
    files = {name: data.decode() for name, data in runner_files().items() if name != "__main__.py"}
    assert {k: v for k, v in modules.items() if k != "codemode_guest.py"} == files


def _other_pythons() -> list[str]:
    """Interpreters other than this one that the test machine happens to have (3.9 first:
    docker images may have it)."""
    found = []
    for version in ("3.9", "3.13"):
        candidates = [
            shutil.which(f"python{version}") or "",
            *glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")),
        ]
        for candidate in candidates:
            if (
                candidate
                and subprocess.run([candidate, "-c", "pass"], capture_output=True, check=False).returncode == 0
            ):
                found.append(candidate)
                break
    return found


BOOT = {
    "code": "import random\nvalues = [random.random() for _ in range(2)]\ny = f(2)\n{'y': y, 'r': values}",
    "functions": [{"name": "f", "source": "def f(x: int) -> int: ..."}],
    "limits": {"timeout_seconds": 10},
    "transport": {"kind": "stdio"},
    "determinism": {"seed": 7},
}


def _argv(python: str, zip_path: Path, style: str) -> list[str]:
    """``bare``: as E2B and Blaxel run it (``python runner.zip``); ``launcher``: as bubblewrap
    and the unjailed python runtime do (``python -I -S -c LAUNCHER runner.zip``)."""
    return [python, "-I", str(zip_path)] if style == "bare" else [python, "-I", "-S", *launch_args(zip_path)]


def _run_zip(argv: list[str], boot: dict, answer: dict) -> list[dict]:
    """Run the runner (the bootstrap on stdin): every protocol line up to the final message."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(boot).encode() + b"\n")
    proc.stdin.flush()
    messages = []
    for line in proc.stdout:
        msg = json.loads(line)
        messages.append(msg)
        if msg["type"] == "call":
            proc.stdin.write(json.dumps({"type": "answer", "call_id": msg["call_id"], **answer}).encode() + b"\n")
            proc.stdin.flush()
        if msg["type"] in ("done", "error"):
            break
    code = proc.wait(timeout=30)  # (stdin still open: the host going away ends the runner with 70)
    proc.stdin.close()
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    return messages


@pytest.mark.parametrize("style", ["bare", "launcher"])
@pytest.mark.parametrize("python", [sys.executable, *_other_pythons()])
def test_a_bare_python_runs_the_zip(tmp_path: Path, python: str, style: str) -> None:
    zip_path = tmp_path / "runner.zip"
    zip_path.write_bytes(runner_zip())
    messages = _run_zip(_argv(python, zip_path, style), BOOT, {"ok": True, "value": 5})
    assert [m["type"] for m in messages] == ["ready", "call", "done"]
    assert messages[1]["function_name"] == "f" and messages[1]["args"] == [2] and messages[1]["line"] == 3
    output = messages[2]["output"]
    assert output["y"] == 5
    # Seeded: the same values from the same seed, on any interpreter.
    again = _run_zip(_argv(sys.executable, zip_path, "bare"), BOOT, {"ok": True, "value": 5})
    assert output["r"] == again[2]["output"]["r"]


@pytest.mark.parametrize("style", ["bare", "launcher"])
@pytest.mark.parametrize("which", ["zip", "compiled"])
def test_errors_keep_the_users_line_and_hide_the_runners_frames(tmp_path: Path, which: str, style: str) -> None:
    if which == "zip":
        zip_path = tmp_path / "runner.zip"
        zip_path.write_bytes(runner_zip())
    else:  # what bubblewrap mounts for the worker's own interpreter
        zip_path = compiled_runner()
    boot = dict(BOOT, code="x = 1\ny = f(2)\n")
    argv = _argv(sys.executable, zip_path, style)
    messages = _run_zip(argv, boot, {"ok": False, "exc_type": "ValueError", "message": "no"})
    error = messages[-1]
    assert (error["type"], error["error_type"], error["message"], error["line"]) == ("error", "ValueError", "no", 2)
    assert 'File "<code>", line 2, in <module>' in error["traceback"]
    assert "codemode_runner" not in error["traceback"] and "__main__" not in error["traceback"]
    assert "LAUNCHER" not in error["traceback"] and "<string>" not in error["traceback"]
    boot = dict(BOOT, code="def g(x):\n    return 1 / x\n\ng(0)\n")
    error = _run_zip(argv, boot, {})[-1]
    assert (error["error_type"], error["line"]) == ("ZeroDivisionError", 2)
    assert "return 1 / x" in error["traceback"] and "codemode_runner" not in error["traceback"]


@pytest.mark.parametrize("python", [sys.executable, *_other_pythons()])
def test_the_launcher_starts_the_code_where_python_runner_zip_would(tmp_path: Path, python: str) -> None:
    """Same ``sys.argv``, and the zip first on ``sys.path`` (no working directory before it)."""
    zip_path = tmp_path / "runner.zip"
    zip_path.write_bytes(runner_zip())
    boot = dict(BOOT, code="import sys\n[sys.argv, sys.path[0], '' in sys.path]")
    seen = [
        _run_zip([*_argv(python, zip_path, style), "--x"], boot, {})[-1]["output"] for style in ("bare", "launcher")
    ]
    assert seen[0] == seen[1] == [[str(zip_path), "--x"], str(zip_path), False]


#: The source zip's path needs a Python of another version than the worker's (3.9 or 3.13; the
#: CI image has pyenv's). Without one, a machine skips it; CI never does.
OTHER_PYTHON_MISSING = "no Python 3.9 or 3.13 besides the worker's: the source zip's path cannot be tried here"


@pytest.mark.parametrize(
    "python",
    _other_pythons()[:1]
    or [pytest.param("", marks=pytest.mark.skipif(not os.environ.get("CI"), reason=OTHER_PYTHON_MISSING))],
)
async def test_the_python_runtime_runs_the_zip_on_another_interpreter(python: str) -> None:
    """Another interpreter than the worker's gets the zip of the sources (not the worker's
    bytecode), jailed, with the user's lines."""
    from codemode.runtimes import ExecutionResult
    from codemode.runtimes.errors import CodeRuntimeError
    from codemode.runtimes.python import PythonRuntime

    assert python, OTHER_PYTHON_MISSING  # in CI: the image has one

    def f(x: int) -> int:
        return x

    rt = PythonRuntime(python=python, warm_interpreters=0)
    try:
        execution = await rt.execute("import sys\ny = f(1)\n[list(sys.version_info[:2]), y]", functions={"f": f})
        async with execution:
            event = await execution.next()
            while not isinstance(event, ExecutionResult):
                await execution.provide_result(5, call_id=event.call_id)
                event = await execution.next()
        version = subprocess.run(
            [python, "-c", "import sys; print(list(sys.version_info[:2]))"], capture_output=True, text=True
        )
        assert event.output == [json.loads(version.stdout), 5]
        with pytest.raises(CodeRuntimeError) as info:
            execution = await rt.execute("x = 1\n1 / 0\n", functions={})
            async with execution:
                await execution.next()
        assert (info.value.error_type, info.value.line) == ("ZeroDivisionError", 2)
        assert "codemode_runner" not in (info.value.traceback or "")
    finally:
        await rt.aclose()
