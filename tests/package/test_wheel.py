"""The package as a user installs it: the wheel, not the checkout.

The wheel holds one import package, ``codemode`` (the runner and the Deno program inside it),
and nothing else. Installed without extras into a fresh virtual environment, it runs the
README's first command, and a Temporal project laid out like Temporal's samples (its own
``activities.py``, ``workflows.py`` and ``worker.py``) runs LLM-written code as a child of its
own workflow. Each extra the base install leaves out is named when it is missing; with the
``pydantic-ai`` extra added, the same project runs an agent with ``DurableCodeMode``.

Slow (a minute or two of pip): the venv is built once for the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import __version__
from codemode.worker.dev_server import free_port, port_is_free
from tests.cli.runner import REPO, base_env
from tests.cli.test_readme import README_EXAMPLE
from tests.test_import_layers import LAYERS as IMPORT_LAYERS

pytestmark = pytest.mark.slow

LAYERS = tuple(IMPORT_LAYERS)
SAMPLE = Path(__file__).with_name("sample_project")
DIST_INFO = f"durable_codemode-{__version__}.dist-info"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--disable-pip-version-check", "-w", str(out), str(REPO)],
        check=True,
        timeout=300,
    )
    return next(out.glob("durable_codemode-*.whl"))


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with the wheel installed, no extras."""
    path = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    _pip(path, str(wheel))
    return path


def _pip(venv: Path, *requirements: str) -> None:
    res = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", *requirements],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr[-3000:]


def _env(venv: Path, **extra: str) -> dict[str, str]:
    """The environment of a user of ``venv``: its ``bin`` first, and nothing of the
    environment the tests run in (its ``bin`` holds deno, codemode and the rest)."""
    env = base_env(**extra)
    env.pop("PYTHONPATH", None)
    ours = Path(sys.prefix) / "bin"
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p) != ours]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv)
    return env


def _run(venv: Path, args: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False
    )


def test_the_wheel_holds_codemode_and_nothing_else(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"codemode", DIST_INFO}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    # Every module of the checkout's layers, under codemode/ (a layer folder added without
    # being found by the package discovery would be missing here).
    expected = {
        f"codemode/{path.relative_to(REPO).as_posix()}"
        for layer in LAYERS
        for path in (REPO / layer).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert expected - names == set()
    # The face, the runner that runs inside every CPython sandbox, and the pyodide runtime's
    # Deno program; the examples, benchmarks and tests stay out.
    for inside in (
        "codemode/__init__.py",
        "codemode/pydantic_ai.py",
        "codemode/py.typed",
        "codemode/runtimes/runner/in_sandbox.py",
        "codemode/runtimes/wasm/runner.mjs",
        # The approvals inbox's pages.
        "codemode/apps/inbox/templates/call.html",
    ):
        assert inside in names
    entry_points = zipfile.ZipFile(wheel).read(f"{DIST_INFO}/entry_points.txt").decode()
    assert "codemode = codemode.apps.cli:main" in entry_points
    assert "mcp = codemode.apps.mcp.command:mcp" in entry_points


def test_the_base_install_is_lean(venv: Path) -> None:
    """What the embedded default needs, not every vendor's SDK."""
    probe = (
        "import importlib.util as u, json; "
        "print(json.dumps({m: u.find_spec(m) is not None for m in "
        "['pydantic_monty', 'temporalio', 'e2b', 'docker', 'aioboto3', 'nbformat', 'mcp', 'deno', 'pydantic_ai']}))"
    )
    res = _run(venv, [str(venv / "bin" / "python"), "-c", probe], cwd=venv, env=_env(venv))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == (
        '{"pydantic_monty": true, "temporalio": true, "e2b": false, "docker": false, "aioboto3": false, '
        '"nbformat": false, "mcp": false, "deno": false, "pydantic_ai": false}'
    )
    version = _run(venv, ["codemode", "--version"], cwd=venv, env=_env(venv))
    assert version.stdout.strip() == f"codemode {__version__}"


@pytest.mark.parametrize(
    ("statement", "extra"),
    [
        ("from codemode.runtimes import get_runtime; get_runtime('e2b')", "e2b"),
        ("from codemode.runtimes import get_runtime; get_runtime('docker')", "docker"),
        ("import codemode.pydantic_ai", "pydantic-ai"),
        ("import codemode.client.histories.notebook", "notebook"),
        ("from codemode.activities.mcp_tools import McpServers", "mcp"),
        (
            "import asyncio; from codemode.storage import S3BlobStore; "
            "asyncio.run(S3BlobStore.open('b', endpoint_url='http://127.0.0.1:9'))",
            "s3",
        ),
        ("from codemode.runtimes.wasm.distribution import find_deno; find_deno()", "pyodide"),
    ],
    ids=lambda v: v if v in {"e2b", "docker", "pydantic-ai", "notebook", "mcp", "s3", "pyodide"} else "",
)
def test_a_missing_extra_is_named(venv: Path, statement: str, extra: str) -> None:
    res = _run(venv, [str(venv / "bin" / "python"), "-c", statement], cwd=venv, env=_env(venv))
    assert res.returncode != 0
    assert f"pip install 'durable-codemode[{extra}]'" in res.stderr, res.stderr[-2000:]


def test_the_readme_example(venv: Path, tmp_path: Path) -> None:
    """The README's command, minus the install, from a folder holding only the examples:
    everything else comes from the installed package, and the embedded server starts itself."""
    command = README_EXAMPLE.split("&&", 1)[1].split()
    assert command[0] == "codemode"
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    port = free_port()
    env = _env(venv, TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    res = _run(venv, command, cwd=work, env=env)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert "started the embedded one" in res.stderr
    assert "→ flaky_exchange_rate(base='EUR', quote='USD')  ✓ 1.08  (3 attempts)" in res.stderr
    assert '"best": "Tokyo"' in res.stdout
    assert (tmp_path / "data" / "temporal.db").is_file()
    assert port_is_free(port)


@pytest.fixture
def sample_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(SAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    return project


@pytest.fixture
def sample_worker(venv: Path, sample_project: Path, temporal_address: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """``python worker.py`` in the user's project, until the test ends."""
    env = _env(venv, TEMPORAL_ADDRESS=temporal_address, CODEMODE_DATA_DIR=str(tmp_path / "data"))
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(venv / "bin" / "python"), "worker.py"], cwd=sample_project, env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 60
        while "worker ready" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.1)
        yield env
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_project_laid_out_like_temporals_samples(venv: Path, sample_project: Path, sample_worker: dict[str, str]) -> None:
    """The user's ``activities.py`` and ``workflows.py`` are theirs: their workflow runs their
    activity, then LLM-written code as a child execution, on their worker with the plugin."""
    res = _run(venv, [str(venv / "bin" / "python"), "starter.py", "Paris"], cwd=sample_project, env=sample_worker)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert res.stdout.strip() == "Hello, Paris! Paris is at 18C"


def test_a_pydantic_ai_agent_in_that_project(
    wheel: Path, venv: Path, sample_project: Path, sample_worker: dict[str, str]
) -> None:
    """With the ``pydantic-ai`` extra added, ``codemode.pydantic_ai.DurableCodeMode`` gives an
    agent its ``run_code`` tool; the code runs as a durable session cell on the user's worker."""
    _pip(venv, f"{wheel}[pydantic-ai]")
    res = _run(venv, [str(venv / "bin" / "python"), "agent.py"], cwd=sample_project, env=sample_worker)
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
    assert res.stdout.strip() == "warmest: 24C"
