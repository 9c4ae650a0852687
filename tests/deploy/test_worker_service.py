"""The compose file's storage-init job and worker service, run with the command and the
environment `docker compose config` renders for them, against the session's real dev server
and a real SeaweedFS. Only what names another container changes: TEMPORAL_ADDRESS and
CODEMODE_S3_ENDPOINT_URL point here, the metrics port is a free one, and the bucket and task
queue are this test's own. So a variable the code does not read (a misspelt CODEMODE_S3_*),
a wrong command or a bucket job that cannot create the bucket fails here."""

from __future__ import annotations

import asyncio
import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import aioboto3
import pytest

from codemode.storage import S3BlobStore
from codemode.worker.dev_server import free_port
from tests.cli.runner import REPO, Background, base_env, cli_command, codemode
from tests.deploy.composefile import compose_binary, render
from tests.s3_local import S3Endpoint


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Endpoint) -> dict[str, Any]:
    """The rendered services, with the test server's key pair as the secrets and the
    settings the file exposes as variables (bucket, endpoint, task queue) set for this test."""
    binary = compose_binary()
    assert binary is not None, "no compose binary: the dev extras install it"
    env_file = tmp_path_factory.mktemp("compose") / "empty.env"
    env_file.write_text("")
    return render(
        binary,
        env_file,
        AWS_ACCESS_KEY_ID=s3_server.access_key,
        AWS_SECRET_ACCESS_KEY=s3_server.secret_key,
        CODEMODE_S3_BUCKET=f"compose-{uuid.uuid4().hex[:8]}",
        CODEMODE_S3_ENDPOINT_URL=s3_server.endpoint_url,
        CODEMODE_TASK_QUEUE=f"compose-{uuid.uuid4().hex[:8]}",
    )["services"]


def service_env(service: dict[str, Any], **overrides: str) -> dict[str, str]:
    return base_env(**{**{k: str(v) for k, v in service["environment"].items()}, **overrides})


async def run(command: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *command, cwd=REPO, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    return proc.returncode or 0, out.decode()


async def bucket_keys(s3: S3Endpoint, bucket: str) -> list[str]:
    session = aioboto3.Session(
        aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key, region_name=s3.region
    )
    store = await S3BlobStore.open(bucket, endpoint_url=s3.endpoint_url, session=session)
    try:
        return await store.list_keys(bucket=bucket, prefix="")
    finally:
        await store.aclose()


def python_executable() -> str:
    """The image's `python`: here, this test's interpreter (the project is installed in it)."""
    return cli_command()[0]


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


async def test_the_worker_runs_as_composed(
    composed: dict[str, Any], s3_server: S3Endpoint, temporal_address: str, tmp_path: Path
) -> None:
    init, worker = composed["storage-init"], composed["worker"]
    bucket = worker["environment"]["CODEMODE_S3_BUCKET"]

    # storage-init: creates the bucket, and succeeds again on every later `up`.
    assert init["command"][:2] == ["python", "-c"]
    for _ in range(2):
        rc, out = await run([python_executable(), *init["command"][1:]], service_env(init))
        assert rc == 0, out
        assert f"object store ready: s3://{bucket} at {s3_server.endpoint_url}" in out

    # worker: `codemode worker ...` with the service's environment.
    assert worker["command"][0] == "codemode"
    metrics = free_port()
    assert worker["environment"]["CODEMODE_METRICS_PORT"] == "9464"
    env = service_env(worker, TEMPORAL_ADDRESS=temporal_address, CODEMODE_METRICS_PORT=str(metrics))
    process = await Background(*worker["command"][1:], env=env, log=tmp_path / "worker.log").start("Worker ready")
    try:
        assert f"Metrics:         http://localhost:{metrics}/metrics (listening on every interface)" in process.output()
        # A client with the same store settings (as on the host, with the published port):
        # the output is over the payload threshold, so the worker stores it in the bucket and
        # the client reads it from there.
        client_env = {k: v for k, v in env.items() if k != "CODEMODE_METRICS_PORT"}
        code = 'w = get_weather("Paris")\nw["sky"] * 50000'
        res = await codemode("run", "-", "--json", env=client_env, stdin=code)
        assert res.rc == 0, f"{res.err}\n--- worker\n{process.output()}"
        assert json.loads(res.out)["output"] == "cloudy" * 50000
        keys = await bucket_keys(s3_server, bucket)
        assert any(k.startswith("v0/") for k in keys), keys  # the SDK's claim-checked payloads
        text = await asyncio.to_thread(scrape, metrics)
        assert "temporal_workflow_completed" in text and env["CODEMODE_TASK_QUEUE"] in text
    finally:
        assert await process.stop() == 0, process.output()


