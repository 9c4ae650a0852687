"""``runtime="docker"`` on Temporal, against podman serving the Docker API (tests/docker_engine.py):
the checkpoint is the container, a run parked on an approval holds a paused container, any
worker continues it by id, a container lost while parked is rebuilt by journal replay, the
network ratchet cuts the network before a private result (and the audit says so), and no
container is left afterwards."""

from __future__ import annotations

import asyncio
import collections
import signal
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from codemode.activities import ToolRegistry
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.runtimes.docker import DockerRuntime
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest
from tests.docker_engine import IMAGE, PodmanService, codemode_containers, engine
from tests.docker_engine import client as engine_client

from .conftest import TOOLS_MODULE, read_events
from .test_approval import wait_for_state
from .test_crash import spawn_worker

CODE = "print('started')\na = slow_step(1, 0)\nr = transfer('bob', a)\nprint('after')\n[a, r['to']]"


@pytest.fixture
async def podman() -> AsyncIterator[PodmanService]:
    """The session's engine (DOCKER_HOST and CODEMODE_DOCKER_IMAGE set for spawned workers);
    afterwards no codemode container may be left."""
    service = engine()
    yield service
    for _ in range(50):  # the release step removes the container as the execution ends
        left = codemode_containers()
        if not left:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"containers left: {[(c['Id'][:12], c.get('State')) for c in left]}")


async def test_parked_run_pauses_its_container_and_another_worker_continues_it(
    client, temporal_address, task_queue, events_file, podman
) -> None:
    first = spawn_worker(temporal_address, task_queue, events_file)
    second = None
    try:
        handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="docker"), task_queue=task_queue)
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        for _ in range(50):  # the release step that pauses it follows the parking
            (parked,) = codemode_containers()
            if parked["State"] == "paused":
                break
            await asyncio.sleep(0.1)
        assert parked["State"] == "paused"  # waiting for a person costs no CPU
        first.send_signal(signal.SIGKILL)
        first.wait()
        second = spawn_worker(temporal_address, task_queue, events_file)
        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    assert outcome.stdout == "started\nafter\n"  # the same process went on: nothing printed twice
    audit = await fetch_audit(client, handle.id)
    ways = [(s.name, s.via) for s in audit.steps if s.name != "sandbox_release"]
    assert ways == [("sandbox_start", "started"), ("sandbox_resume", "live"), ("sandbox_resume", "restored")], ways
    lines = display.audit_lines(audit)
    assert any("paused the sandbox while the run waits" in ln for ln in lines)
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # each tool ran once


async def test_container_removed_while_parked_is_rebuilt_by_replay(client, task_queue, events_file, podman) -> None:
    registry = ToolRegistry.from_module(TOOLS_MODULE)
    async with CodeModeWorker(client, registry, task_queue=task_queue).running():
        handle = await start_execution(client, CodeExecutionRequest(code=CODE, runtime="docker"), task_queue=task_queue)
        await wait_for_state(handle, "awaiting_approval", timeout=60)
        (parked,) = codemode_containers()
        docker = engine_client(podman.url)
        docker.api.remove_container(parked["Id"], force=True)  # reaped, pruned, removed by someone
        docker.close()
        await handle.signal("approve", ApproveSignal(call_id="2", by="ana"))
        outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    assert outcome.output == [10, "bob"]
    assert outcome.stdout == "started\nafter\n"  # replayed prints are not shown twice
    lines = display.audit_lines(await fetch_audit(client, handle.id))
    assert any("replayed the journal because" in ln for ln in lines), lines
    starts = collections.Counter(e["tool"] for e in read_events(events_file) if e["event"] == "start")
    assert starts == {"slow_step": 1, "transfer": 1}  # the journal answered the replay
    usage = outcome.usage["docker"]
    assert (usage.sandboxes_created, usage.replays) == (2, 1), usage  # the lost one, and the replay's


@pytest.fixture
def probe_network(podman: PodmanService) -> Iterator[tuple[str, str]]:
    """An internal network (no route off this machine) with a TCP listener: (network, ip)."""
    import time

    docker = engine_client(podman.url)
    name = f"codemode-test-{uuid.uuid4().hex[:8]}"
    network = docker.networks.create(name, driver="bridge", internal=True)
    listener = (
        "import socket\ns = socket.socket()\ns.bind(('0.0.0.0', 8000))\ns.listen()\nprint('ready', flush=True)\n"
        "while True:\n    s.accept()[0].close()\n"
    )
    server = docker.containers.run(
        IMAGE, ["python3", "-c", listener], detach=True, network=name, labels={"codemode-test": "1"}
    )
    try:
        for _ in range(200):
            if b"ready" in server.logs():
                break
            time.sleep(0.05)
        server.reload()
        yield name, server.attrs["NetworkSettings"]["Networks"][name]["IPAddress"]
    finally:
        server.remove(force=True)
        network.remove()
        docker.close()


async def test_the_ratchet_cuts_the_network_before_a_private_result_and_the_audit_says_so(
    client, task_queue, podman, probe_network
) -> None:
    name, ip = probe_network
    code = (
        "import socket\n"
        "def probe():\n"
        "    try:\n        socket.create_connection((%r, 8000), timeout=2).close()\n        return 'open'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "seen = [probe(), public_note('hello')]\n"
        "seen.append(probe())\n"
        "record = patient_record(7)\n"
        "seen += [probe(), record['name']]\n"
        "seen\n" % ip
    )
    registry = ToolRegistry.from_module("tests.workflows.private_tools")
    runtime = DockerRuntime(image=IMAGE, base_url=podman.url, network_name=name)
    async with CodeModeWorker(client, registry, task_queue=task_queue, runtimes={"docker": runtime}).running():
        request = CodeExecutionRequest(code=code, runtime="docker", network="ratchet")
        handle = await start_execution(client, request, task_queue=task_queue)
        outcome = await asyncio.wait_for(handle.result(), 120)
    assert outcome.success, outcome.error
    # A public result leaves the network on; the private one cuts it before the code sees it.
    assert outcome.output == ["open", "HELLO", "open", "OSError", "Ada"]
    audit = await fetch_audit(client, handle.id)
    (cut,) = [s for s in audit.steps if s.network_cut]
    assert cut.network_cut == "patient_record() returned private data (call 2)"
    lines = display.audit_lines(audit)
    assert any("cut the sandbox's network for good before the code saw it: patient_record()" in ln for ln in lines)
    private = [c for c in audit.calls if c.tool == "patient_record"]
    assert len(private) == 1


async def test_python_refuses_the_ratchet_in_band(client, worker, task_queue) -> None:
    request = CodeExecutionRequest(code="1", runtime="python", network="ratchet")
    handle = await start_execution(client, request, task_queue=task_queue)
    outcome = await asyncio.wait_for(handle.result(), 60)
    assert not outcome.success and outcome.error is not None
    assert outcome.error.kind == "capability" and "ratchet" in outcome.error.message


async def test_cli_runs_code_in_a_container_with_a_read_only_mount(temporal_address, podman, tmp_path) -> None:
    import os

    from tests.cli.runner import base_env, codemode

    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "hello.txt").write_text("hello from the host\n")
    os.chmod(tmp_path, 0o755)
    code = tmp_path / "code.py"
    code.write_text("print(open('/skills/hello.txt').read().strip())\nbest = lookup('Tokyo')\nbest['city']\n")
    env = base_env(
        TEMPORAL_ADDRESS=temporal_address,
        CODEMODE_TASK_QUEUE=f"cli-docker-{uuid.uuid4().hex[:6]}",
        CODEMODE_DATA_DIR=os.environ["CODEMODE_DATA_DIR"],
        DOCKER_HOST=podman.url,
    )
    args = ["run", str(code), "--tools", TOOLS_MODULE, "--runtime", "docker", "--image", IMAGE]
    result = await codemode(*args, "--mount", f"{skills}:/skills", env=env)
    assert result.rc == 0, result
    assert "hello from the host" in result.out and '"Tokyo"' in result.out
    assert "✓ completed" in result.err
    bad = await codemode(*args, "--mount", f"{tmp_path / 'nowhere'}:/skills", env=env)
    assert bad.rc != 0 and "does not exist" in bad.err
