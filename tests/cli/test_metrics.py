"""Workers expose Prometheus metrics (temporalio's runtime telemetry) with --metrics-port."""

from __future__ import annotations

import asyncio
import socket
import urllib.request
import uuid
from pathlib import Path

from codemode.worker.dev_server import free_port
from tests.cli.runner import Background, base_env, codemode


async def scrape(port: int) -> str:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            return resp.read().decode()

    return await asyncio.to_thread(get)


def samples(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


async def test_worker_serves_metrics_after_a_run(cli_env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    env = {**cli_env, "CODEMODE_TASK_QUEUE": f"cli-metrics-{uuid.uuid4().hex[:6]}"}
    args = ("worker", "--tools", "examples.tools", "--metrics-port", f"127.0.0.1:{port}")
    worker = await Background(*args, env=env, log=tmp_path / "worker.log").start("Worker ready")
    try:
        assert f"Metrics:         http://127.0.0.1:{port}/metrics" in worker.output()
        res = await codemode("run", "-", env=env, stdin='get_weather("Paris")["sky"]')
        assert res.rc == 0, res
        lines = samples(await scrape(port))
    finally:
        assert await worker.stop() == 0, worker.output()
    queue = f'task_queue="{env["CODEMODE_TASK_QUEUE"]}"'
    assert any(ln.startswith("temporal_workflow_completed{") and queue in ln for ln in lines), lines
    assert any(
        ln.startswith("temporal_activity_execution_latency_count{") and 'activity_type="get_weather"' in ln
        for ln in lines
    ), lines


async def test_dev_serves_metrics(tmp_path: Path) -> None:
    port, metrics = free_port(), free_port()
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{port}", CODEMODE_DATA_DIR=str(tmp_path / "data"))
    args = ("dev", "--tools", "examples.tools", "--port", str(port), "--metrics-port", str(metrics))
    dev = await Background(*args, env=env, log=tmp_path / "dev.log").start("Worker ready")
    try:
        assert f"Metrics:         http://localhost:{metrics}/metrics (listening on every interface)" in dev.output()
        names = {ln.split("{")[0].split()[0] for ln in samples(await scrape(metrics))}
    finally:
        assert await dev.stop() == 0, dev.output()
    assert "temporal_worker_start" in names and "temporal_request" in names, names


async def test_metrics_port_errors_exit_2() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        res = await codemode(
            "worker", "--tools", "examples.tools", "--metrics-port", f"127.0.0.1:{taken}", env=base_env()
        )
    assert res.rc == 2 and f"cannot serve metrics at 127.0.0.1:{taken}" in res.err, res
    for bad in ("lots", "example.com:9464", "70000"):
        res = await codemode("worker", "--tools", "examples.tools", "--metrics-port", bad, env=base_env())
        assert res.rc == 2 and "Invalid value for '--metrics-port'" in res.err, res
