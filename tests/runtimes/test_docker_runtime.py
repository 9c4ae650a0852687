"""DockerRuntime beyond the contract: the container as the checkpoint, pause and removal,
hostile code, the network ratchet, read-only mounts, the orphan sweep.

Real parts throughout: podman serving the Docker API (tests/docker_engine.py), the
unmodified docker SDK, a Debian image with python3, numpy and pandas, our runner in it. A
fresh ``DockerRuntime`` stands for another worker: it shares nothing with the first but the
checkpoint's bytes.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from codemode.runtimes import (
    CapabilityError,
    CodeExecution,
    CodeResourceError,
    CodeTimeoutError,
    ExecutionLimits,
    ExecutionResult,
    FunctionCall,
    SandboxOptions,
    get_runtime,
)
from codemode.runtimes.checkpoint import read_header
from codemode.runtimes.docker import DockerRuntime, DockerSettingsError
from tests.docker_engine import IMAGE, codemode_containers, engine
from tests.docker_engine import client as engine_client

from .conftest import docker_runtime

HANG_GUARD_S = 60.0
T = TypeVar("T")


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, HANG_GUARD_S)


def get(i: int) -> int:
    """A tool."""
    raise NotImplementedError


def rows() -> list[dict[str, Any]]:
    """Sales rows."""
    raise NotImplementedError


def patient(pid: int) -> dict[str, Any]:
    """A private record."""
    raise NotImplementedError


TOOLS = {"get": get}
CODE = "print('started')\na = get(1)\nprint('got', a)\nb = get(2)\n[a, b]\n"


@pytest.fixture
async def rt() -> AsyncIterator[DockerRuntime]:
    runtime = docker_runtime()
    try:
        yield runtime
    finally:
        await runtime.aclose()


def states() -> dict[str, str]:
    return {c["Id"]: str(c.get("State")) for c in codemode_containers()}


def container_of(blob: bytes) -> str:
    header = read_header(blob)
    assert header is not None and header["runtime"] == "docker"
    return str(header["meta"]["container_id"])


async def value(rt: DockerRuntime, code: str, limits: ExecutionLimits | None = None, **kw: Any) -> Any:
    execution = await guarded(rt.execute(code, functions={}, limits=limits, **kw))
    async with execution:
        result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    return result.output


async def first_call(rt: DockerRuntime) -> tuple[CodeExecution, FunctionCall, bytes]:
    execution = await guarded(rt.execute(CODE, functions=TOOLS))
    batch = await guarded(execution.next_batch())
    assert isinstance(batch, list) and [(c.function_name, c.args) for c in batch] == [("get", [1])]
    blob = execution.dump()
    assert blob is not None
    return execution, batch[0], blob


async def finish(execution: CodeExecution, first: FunctionCall) -> ExecutionResult:
    await execution.provide_result(100, call_id=first.call_id)
    batch = await guarded(execution.next_batch())
    assert isinstance(batch, list) and [c.args for c in batch] == [[2]]
    await execution.provide_result(200, call_id=batch[0].call_id)
    result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    return result


# -- the checkpoint is the container ------------------------------------------------------------


async def test_a_paused_container_goes_on_in_another_runtime_without_replay() -> None:
    worker_a = docker_runtime()
    execution, call, blob = await first_call(worker_a)
    cid = container_of(blob)
    assert len(blob) < 2048  # ids and a position, no heap
    await execution.close()  # the checkpoint is current: only detaches
    await worker_a.aclose()
    await guarded(worker_a.suspend(blob))
    await guarded(worker_a.suspend(blob))  # already paused: no error
    assert states() == {cid: "paused"}

    worker_b = docker_runtime()  # another worker: nothing shared but the bytes
    restored = await guarded(worker_b.restore(blob))
    assert restored is not None
    assert [(c.call_id, c.args) for c in restored.pending_calls] == [(call.call_id, [1])]
    result = await finish(restored, call)
    # The same process went on: "started" is not printed again and each answer arrived once.
    assert result.output == [100, 200]
    assert result.stdout == "got 100\n"
    assert result.tool_calls == 2
    await worker_b.aclose()
    assert states() == {}  # the result removes the container


async def test_a_kept_handle_goes_on_after_dump(rt: DockerRuntime) -> None:
    execution, call, _ = await first_call(rt)
    result = await finish(execution, call)
    assert result.stdout == "started\ngot 100\n"


async def test_a_removed_container_is_refused_and_discard_is_idempotent(rt: DockerRuntime) -> None:
    execution, _, blob = await first_call(rt)
    await execution.close()
    client = engine_client(engine().url)
    client.api.remove_container(container_of(blob), force=True)
    client.close()
    other = docker_runtime()
    assert await guarded(other.restore(blob)) is None  # the caller replays the journal
    await other.discard(blob)  # gone already: no error
    await other.aclose()


async def test_a_checkpoint_of_another_runner_version_is_refused(rt: DockerRuntime) -> None:
    execution, _, blob = await first_call(rt)
    forged = blob.replace(b'"version":"1-', b'"version":"0-')
    assert await rt.restore(forged) is None
    await rt.discard(blob)
    await execution.close()


async def test_settings_errors_are_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEMODE_DOCKER_IMAGE", raising=False)
    with pytest.raises(DockerSettingsError, match="CODEMODE_DOCKER_IMAGE"):
        DockerRuntime()
    monkeypatch.setenv("CODEMODE_DOCKER_IMAGE", IMAGE)
    monkeypatch.setenv("DOCKER_HOST", engine().url)
    rt = get_runtime("docker")  # what a worker builds from its environment
    assert isinstance(rt, DockerRuntime) and rt.image == IMAGE
    prompt = DockerRuntime(image=IMAGE, base_url=engine().url, image_packages=["pandas", "numpy"]).prompt(TOOLS)
    assert "installed: pandas, numpy" in prompt and "def get(i: int) -> int" in prompt
    missing = DockerRuntime(image="localhost/no-such-image:1", base_url=engine().url)
    with pytest.raises(Exception, match="no-such-image"):
        await missing.execute("1", functions={})
    await rt.aclose()
    await missing.aclose()


# -- what code can do ---------------------------------------------------------------------------


async def test_a_pandas_program_groups_a_tools_rows(rt: DockerRuntime) -> None:
    code = (
        "import pandas as pd\n"
        "df = pd.DataFrame(rows())\n"
        "totals = df.groupby('region')['amount'].sum().sort_index()\n"
        "print(totals.to_string())\n"
        "{k: int(v) for k, v in totals.items()}\n"
    )
    data = [{"region": r, "amount": a} for r, a in [("north", 10), ("south", 5), ("north", 7), ("east", 1)] * 250]
    execution = await guarded(rt.execute(code, functions={"rows": rows}))
    async with execution:
        call = await guarded(execution.next())
        assert isinstance(call, FunctionCall) and call.function_name == "rows"
        await execution.provide_result(data, call_id=call.call_id)
        result = await guarded(execution.next())
    assert isinstance(result, ExecutionResult)
    assert result.output == {"east": 250, "north": 4250, "south": 1250}
    assert "north" in result.stdout


# -- hostile code -------------------------------------------------------------------------------

PROJECT = Path(__file__).resolve().parents[2]


async def test_escape_probes_find_nothing(rt: DockerRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "hunter2")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    probe = (
        "import os, socket, sys\n"
        "def readable(p):\n"
        "    try:\n        open(p, 'rb').read(1)\n        return True\n"
        "    except OSError:\n        return False\n"
        "def writable(p):\n"
        "    try:\n        open(p, 'w').write('x')\n        return True\n"
        "    except OSError:\n        return False\n"
        "def connect(host, port):\n"
        "    try:\n        socket.create_connection((host, port), timeout=2).close()\n        return 'open'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "{'shadow': readable('/etc/shadow'), 'project': os.path.exists(%r), 'env': dict(os.environ),\n"
        " 'denied': [p for p in ['/x', '/usr/x', '/etc/x', sys.prefix + '/x', '/proc/x', '/dev/x'] if writable(p)],\n"
        " 'tmp': writable('/tmp/x'), 'home': writable(os.path.expanduser('~/x')), 'cwd': os.getcwd(),\n"
        " 'uid': os.getuid(), 'eff': status['CapEff'].strip(), 'nnp': status['NoNewPrivs'].strip(),\n"
        " 'ifaces': [n for _, n in socket.if_nameindex()], 'loopback': connect('127.0.0.1', %d),\n"
        " 'outside': connect('192.0.2.1', 80)}" % (str(PROJECT / "pyproject.toml"), port)
    )
    try:
        out = await value(rt, probe)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing reached the host's loopback
    finally:
        listener.close()
    assert out["shadow"] is False and out["project"] is False
    assert "CODEMODE_TEST_SECRET" not in out["env"] and "hunter2" not in str(out["env"])
    assert not any(k.startswith(("DOCKER", "TEMPORAL", "AWS", "E2B")) for k in out["env"])
    assert out["denied"] == []
    assert out["tmp"] and out["home"] and out["cwd"] == "/sandbox"
    assert out["uid"] == 65534 and out["eff"] == "0000000000000000" and out["nnp"] == "1"
    assert out["ifaces"] == ["lo"]  # no network device at all
    assert out["loopback"] == "ConnectionRefusedError"  # its own loopback, not the host's
    assert out["outside"] == "OSError"  # ENETUNREACH


async def test_fork_bomb_and_memory_bomb_end_the_run_not_the_worker() -> None:
    rt = docker_runtime(max_processes=32)
    try:
        limits = ExecutionLimits(timeout_seconds=2, max_memory_bytes=128 * 1024 * 1024)
        bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
        with pytest.raises(CodeTimeoutError):
            await value(rt, bomb, limits)
        code = (
            "import os, time\nn = 0\nwhile n < 1000:\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(60)\n            os._exit(0)\n    except OSError:\n        break\n    n += 1\nn"
        )
        assert 0 < await value(rt, code, limits) < 32  # the pids limit holds
        with pytest.raises(CodeResourceError) as err:
            await value(rt, "x = bytearray(10**10)", limits)
        assert err.value.error_type == "MemoryError" and err.value.line == 1
        with pytest.raises(CodeResourceError) as err:
            await value(rt, "chunks = []\nwhile True:\n    chunks.append(b' ' * 10**6)\n", limits)
        assert err.value.error_type == "MemoryError" and err.value.line == 3
        assert await value(rt, "len(bytearray(10**7))", limits) == 10**7  # the worker is fine
    finally:
        await rt.aclose()


# -- sandbox options ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def probe_network() -> Iterator[tuple[str, str]]:
    """An internal network (no route off this machine) with a TCP listener on it: (network, ip)."""
    client = engine_client(engine().url)
    name = f"codemode-test-{uuid.uuid4().hex[:8]}"
    network = client.networks.create(name, driver="bridge", internal=True)
    listener = (
        "import socket\ns = socket.socket()\ns.bind(('0.0.0.0', 8000))\ns.listen()\nprint('ready', flush=True)\n"
        "while True:\n    s.accept()[0].close()\n"
    )
    server = client.containers.run(IMAGE, ["python3", "-c", listener], detach=True, network=name, labels={"codemode-test": "1"})
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
        client.close()


async def test_the_ratchet_cuts_the_network_before_the_private_result(probe_network: tuple[str, str]) -> None:
    name, ip = probe_network
    rt = docker_runtime(network_name=name)
    code = (
        "import socket\n"
        "def probe():\n"
        "    try:\n        socket.create_connection((%r, 8000), timeout=2).close()\n        return 'open'\n"
        "    except OSError as e:\n        return type(e).__name__\n"
        "before = probe()\n"
        "record = patient(7)\n"
        "[before, probe(), record['name'], [n for _, n in socket.if_nameindex()]]\n" % ip
    )
    try:
        execution = await guarded(rt.execute(code, functions={"patient": patient}, options=SandboxOptions(network="ratchet")))
        async with execution:
            call = await guarded(execution.next())
            assert isinstance(call, FunctionCall)
            blob = execution.dump()  # a checkpoint taken before the cut still restores after it
            assert await execution.cut_network("patient() returned private data (call 1)") is True
            assert await execution.cut_network("again") is False  # one way: nothing left to cut
            await execution.provide_result({"name": "Ada"}, call_id=call.call_id)
            result = await guarded(execution.next())
        assert isinstance(result, ExecutionResult)
        assert result.output == ["open", "OSError", "Ada", ["lo"]]
        assert blob is not None
        # network="full" stays on, and a runtime with no network has nothing to cut.
        assert (await value(rt, code.split("record =")[0] + "before", options=SandboxOptions(network="full"))) == "open"
        plain = await guarded(rt.execute("1", functions={}))
        async with plain:
            assert await plain.cut_network("private") is False
    finally:
        await rt.aclose()


async def test_read_only_mounts_are_readable_not_writable(rt: DockerRuntime, tmp_path: Path) -> None:
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "SKILL.md").write_text("# How to file a report\n")
    os.chmod(tmp_path, 0o755)
    code = (
        "import os\n"
        "def writable(p):\n"
        "    try:\n        open(p, 'w').write('x')\n        return True\n"
        "    except OSError as e:\n        return e.errno\n"
        "[open('/skills/SKILL.md').read(), sorted(os.listdir('/skills')), writable('/skills/SKILL.md'),"
        " writable('/skills/new.md')]"
    )
    options = SandboxOptions(mounts={str(skills): "/skills"})
    expected = ["# How to file a report\n", ["SKILL.md"], 30, 30]  # EROFS
    assert await value(rt, code, options=options) == expected
    with pytest.raises(CapabilityError, match="does not exist"):
        await rt.execute("1", functions={}, options=SandboxOptions(mounts={str(tmp_path / "no"): "/x"}))
    with pytest.raises(CapabilityError, match="cannot install packages"):
        await rt.execute("1", functions={}, options=SandboxOptions(packages=["tabulate"]))


# -- orphans ------------------------------------------------------------------------------------


async def test_sweep_removes_orphans_and_keeps_parked_runs(rt: DockerRuntime) -> None:
    from datetime import timedelta

    from codemode.runtimes.types import Determinism

    orphan = await rt.create_container(ExecutionLimits(), SandboxOptions(), Determinism(seed=1).hash_seed)
    execution, _, blob = await first_call(rt)
    await execution.close()  # parked: detached, still running
    await rt.suspend(blob)
    other = docker_runtime()
    assert await other.sweep() == []  # within the grace period: maybe a start under way
    assert await other.sweep(grace=timedelta(0)) == [orphan]  # the created, never started one
    assert states() == {container_of(blob): "paused"}  # a parked run is kept
    assert await other.sweep(max_age=timedelta(0)) == [container_of(blob)]  # past every approval timeout
    await other.aclose()
