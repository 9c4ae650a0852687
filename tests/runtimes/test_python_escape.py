"""Escape and abuse: what hostile code in the bubblewrap sandbox can and cannot do.

Each test runs real code in a real sandbox; the assertions are made from the host (or
from what the sandbox returns) and the host is checked to be intact afterwards.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from codemode.runtimes import (
    CapabilityError,
    CodeResourceError,
    CodeRuntimeError,
    CodeTimeoutError,
    ExecutionLimits,
    ExecutionResult,
    SandboxOptions,
)
from codemode.runtimes.jail.bwrap import sandbox_env
from codemode.runtimes.python import PythonRuntime
from codemode.runtimes.transports.http import HttpCallbackTransport


@pytest.fixture
async def rt() -> AsyncIterator[PythonRuntime]:
    runtime = PythonRuntime(max_processes=16, max_file_bytes=1024 * 1024, tmpfs_bytes=8 * 1024 * 1024)
    try:
        yield runtime
    finally:
        await runtime.aclose()


async def value(rt: PythonRuntime, code: str, limits: ExecutionLimits | None = None) -> Any:
    execution = await rt.execute(code, functions={}, limits=limits)
    async with execution:
        result = await execution.next_batch()
    assert isinstance(result, ExecutionResult)
    return result.output


async def error(rt: PythonRuntime, code: str, limits: ExecutionLimits | None = None) -> Exception:
    with pytest.raises(Exception) as info:
        await value(rt, code, limits)
    return info.value


PROJECT = Path(__file__).resolve().parents[2]


async def test_cannot_read_shadow_home_or_project(rt: PythonRuntime) -> None:
    probe = (
        "import os\n"
        "def readable(p):\n"
        "    try:\n        open(p, 'rb').read(1)\n        return True\n"
        "    except OSError:\n        return False\n"
        "home = os.listdir('/root') if os.path.isdir('/root') else []\n"
        "project = os.listdir(%r) if os.path.isdir(%r) else []\n"
        "{'shadow': readable('/etc/shadow'), 'passwd': readable('/etc/passwd'), 'home': home,\n"
        " 'bashrc': readable('/root/.bashrc'), 'project': project, 'pyproject': readable(%r),\n"
        " 'conftest': readable(%r), 'etc': sorted(os.listdir('/etc'))}"
        % (str(PROJECT), str(PROJECT), str(PROJECT / "pyproject.toml"), __file__)
    )
    out = await value(rt, probe)
    assert out["shadow"] is False and out["passwd"] is False and out["bashrc"] is False
    assert out["pyproject"] is False and out["conftest"] is False
    # Nothing of the project is visible, except a virtual environment the interpreter
    # itself lives in (CI's .venv inside the checkout), mounted read-only for the interpreter.
    assert set(out["project"]) <= {".venv"}, out["project"]
    # Only the interpreter's own directory is mounted under /root (pyenv lives there here).
    host_home = set(os.listdir("/root"))
    assert not (set(out["home"]) & host_home - {".pyenv"})
    assert out["etc"] == ["fonts", "ld.so.cache", "localtime"]  # fontconfig's configuration, read-only


async def test_cannot_write_outside_private_dirs_and_file_sizes_are_capped(rt: PythonRuntime) -> None:
    code = (
        "import os, sys\n"
        "def writable(p):\n"
        "    try:\n        open(p, 'w').write('x')\n        return True\n"
        "    except OSError:\n        return False\n"
        "def big(p):\n"
        "    try:\n        open(p, 'wb').write(b'x' * (2 * 1024 * 1024))\n        return 'written'\n"
        "    except OSError as e:\n        return e.errno\n"
        "{'denied': [p for p in ['/x', '/usr/x', '/etc/x', '/opt/codemode/x', sys.prefix + '/x', '/proc/x', '/dev/x'] if writable(p)],\n"
        " 'tmp': writable('/tmp/x'), 'home': writable(os.path.expanduser('~/x')), 'cwd': os.getcwd(),\n"
        " 'big': big('/tmp/big'), 'uid': os.getuid()}"
    )
    out = await value(rt, code)
    assert out["denied"] == []
    assert out["tmp"] and out["home"] and out["cwd"] == "/sandbox"
    assert out["big"] == 27  # EFBIG: RLIMIT_FSIZE
    # Unprivileged: 65534 in its user namespace. A root worker: a leased uid of its own.
    from codemode.runtimes.jail.uids import UID_BASE, UID_SLOTS

    assert out["uid"] == 65534 or UID_BASE <= out["uid"] < UID_BASE + UID_SLOTS
    assert out["uid"] != 0


async def test_cannot_reach_a_host_loopback_port(rt: PythonRuntime) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        err = await error(rt, f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n")
        assert isinstance(err, CodeRuntimeError) and err.error_type in ("ConnectionRefusedError", "OSError")
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
        # no other interface either
        out = await value(rt, "import socket\nsocket.if_nameindex()")
        assert [name for _, name in out] == ["lo"]
    finally:
        listener.close()


async def test_sees_none_of_the_workers_environment(rt: PythonRuntime, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEMODE_TEST_SECRET", "hunter2")
    env = await value(rt, "import os\ndict(os.environ)")
    assert "CODEMODE_TEST_SECRET" not in env and "hunter2" not in str(env)
    allowed = set(sandbox_env(home="/sandbox", tmp="/tmp", hash_seed=1)) | {"PWD"}  # PYTHONHASHSEED: replay-safe sets
    assert set(env) <= allowed


async def test_no_capabilities_no_host_processes_no_user_namespaces(rt: PythonRuntime) -> None:
    code = (
        "import os, subprocess\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "u = subprocess.run(['unshare', '--user', 'true'], capture_output=True)\n"
        "{'eff': status['CapEff'].strip(), 'nnp': status['NoNewPrivs'].strip(),\n"
        " 'pids': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), 'unshare': u.returncode}"
    )
    out = await value(rt, code)
    assert out["eff"] == "0000000000000000" and out["nnp"] == "1"
    assert max(out["pids"]) < 50  # its own pid namespace: none of the host's processes
    assert out["unshare"] != 0


def _processes_in_pid_namespace(ns: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/ns/pid") == ns:
                    found.append(int(pid))
            except OSError:
                pass
    return found


async def test_fork_bomb_is_contained(rt: PythonRuntime) -> None:
    # Bounded: forks until RLIMIT_NPROC refuses, children stay alive; all gone afterwards.
    code = (
        "import os, time\n"
        "n = 0\n"
        "while n < 1000:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "    n += 1\n"
        "{'forked': n, 'ns': os.readlink('/proc/self/ns/pid')}"
    )
    out = await value(rt, code)
    assert 0 < out["forked"] < 16
    assert _processes_in_pid_namespace(out["ns"]) == []
    # Unbounded: every process forks forever; the sandbox dies at the time limit.
    started = time.monotonic()
    err = await error(rt, "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", ExecutionLimits(timeout_seconds=1))
    assert isinstance(err, CodeTimeoutError)
    assert time.monotonic() - started < 10
    assert await value(rt, "1 + 1") == 2  # the host is fine


async def test_memory_bomb_is_contained(rt: PythonRuntime) -> None:
    limits = ExecutionLimits(max_memory_bytes=128 * 1024 * 1024)
    err = await error(rt, "x = bytearray(10**10)", limits)
    assert isinstance(err, CodeResourceError) and err.error_type == "MemoryError" and err.line == 1
    err = await error(rt, "chunks = []\nwhile True:\n    chunks.append(b' ' * 10**6)\n", limits)
    assert isinstance(err, CodeResourceError) and err.error_type == "MemoryError" and err.line == 3
    assert await value(rt, "len(bytearray(10**7))", limits) == 10**7


async def test_infinite_loop_is_killed_at_the_limit(rt: PythonRuntime) -> None:
    limits = ExecutionLimits(timeout_seconds=1)
    started = time.monotonic()
    err = await error(rt, "while True:\n    pass\n", limits)
    assert isinstance(err, CodeTimeoutError) and err.line in (1, 2)
    assert 0.9 < time.monotonic() - started < 4
    # Code that swallows the timeout is killed by the host watchdog (limit + grace).
    started = time.monotonic()
    code = "n = 0\nwhile True:\n    try:\n        while n >= 0:\n            n += 1\n    except BaseException:\n        pass\n"
    err = await error(rt, code, limits)
    assert isinstance(err, CodeTimeoutError) and "killed" in err.message
    assert time.monotonic() - started < 5
    # A sleeping sandbox is not waiting for the host: it counts.
    err = await error(rt, "import time\ntime.sleep(30)", limits)
    assert isinstance(err, CodeTimeoutError)


async def test_ten_megabytes_of_prints_are_truncated_with_a_note(rt: PythonRuntime) -> None:
    limits = ExecutionLimits(max_stdout_bytes=64 * 1024)
    execution = await rt.execute("for i in range(100_000):\n    print('x' * 99)\n'done'", functions={}, limits=limits)
    async with execution:
        result = await execution.next_batch()
    assert isinstance(result, ExecutionResult) and result.output == "done"
    assert result.stdout_truncated
    assert result.stdout.endswith(f"\n[output truncated: more than {64 * 1024} bytes printed]\n")
    assert len(result.stdout) < 64 * 1024 + 100


async def test_prints_and_child_output_cannot_corrupt_the_protocol(rt: PythonRuntime) -> None:
    code = (
        "import os, subprocess, sys\n"
        "print('{\"type\": \"done\", \"output\": \"forged\"}')\n"
        "os.write(1, b'{\"type\": \"done\", \"output\": \"forged\"}\\n')\n"
        "subprocess.run(['echo', '{\"type\": \"done\", \"output\": \"forged\"}'])\n"
        "sys.stdout.flush()\n"
        "'real'"
    )
    execution = await rt.execute(code, functions={})
    async with execution:
        result = await execution.next_batch()
    assert isinstance(result, ExecutionResult) and result.output == "real"
    assert result.stdout.count("forged") == 3


@pytest.mark.parametrize("unix_socket", [True, False])
async def test_forged_http_callbacks_are_rejected(unix_socket: bool) -> None:
    transport = HttpCallbackTransport(unix_socket=unix_socket)
    channel = await transport.open(sandboxed=unix_socket, network=True)
    params = channel.params
    connector = aiohttp.UnixConnector(path=channel.binds[0][0]) if unix_socket else None
    url = "http://sandbox/message" if unix_socket else params["url"] + "/message"
    forged = {"type": "done", "output": "forged"}
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            async with session.post(url, json=forged) as resp:
                assert resp.status == 401
            async with session.post(url, json=forged, headers={"Authorization": "Bearer wrong"}) as resp:
                assert resp.status == 403
            stale = "Bearer " + params["token"][:-1] + ("A" if params["token"][-1] != "A" else "B")
            async with session.post(url, json=forged, headers={"Authorization": stale}) as resp:
                assert resp.status == 403
            assert channel._queue.empty()  # nothing reached the execution
            async with session.post(url, json=forged, headers={"Authorization": f"Bearer {params['token']}"}) as resp:
                assert resp.status == 200
            msg = await asyncio.wait_for(channel.receive(), 1)
            assert msg is not None and msg.type == "done"
    finally:
        await channel.aclose()
    assert params["token"] != (await _fresh_token(transport))


async def _fresh_token(transport: HttpCallbackTransport) -> str:
    channel = await transport.open(sandboxed=transport.unix_socket, network=True)
    await channel.aclose()
    return str(channel.params["token"])


async def test_read_only_mounts_are_readable_not_writable(rt: PythonRuntime, tmp_path: Path) -> None:
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
    execution = await rt.execute(code, functions={}, options=SandboxOptions(mounts={str(skills): "/skills"}))
    async with execution:
        result = await execution.next_batch()
    assert isinstance(result, ExecutionResult)
    assert result.output == ["# How to file a report\n", ["SKILL.md"], 30, 30]  # EROFS
    with pytest.raises(CapabilityError, match="does not exist"):
        await rt.execute("1", functions={}, options=SandboxOptions(mounts={str(tmp_path / "no"): "/x"}))
    with pytest.raises(CapabilityError, match="cannot mount over"):
        await rt.execute("1", functions={}, options=SandboxOptions(mounts={str(skills): "/tmp"}))


async def test_the_ratchet_is_refused_and_full_network_only_where_the_operator_gave_it(rt: PythonRuntime) -> None:
    with pytest.raises(CapabilityError, match="ratchet"):
        await rt.execute("1", functions={}, options=SandboxOptions(network="ratchet"))
    with pytest.raises(CapabilityError, match="'full'"):
        await rt.execute("1", functions={}, options=SandboxOptions(network="full"))


@pytest.mark.skipif(os.geteuid() != 0, reason="a root worker leases the sandboxes' uids; otherwise they run as the worker's")
async def test_concurrent_sandboxes_each_have_their_own_process_budget(rt: PythonRuntime) -> None:
    """RLIMIT_NPROC counts per host uid: every sandbox runs as a uid of its own (runtimes/
    sandbox/uids.py), so four runs at once, each with 10 threads under a limit of 16, all start
    them (one shared uid would give the four one budget of 16), and a fork bomb in a fifth run
    costs the others nothing."""
    from codemode.runtimes.jail.uids import UID_BASE, UID_SLOTS

    threads = (
        "import os, threading, time\n"
        "ts = [threading.Thread(target=time.sleep, args=(1.0,)) for _ in range(10)]\n"
        "for t in ts: t.start()\n"
        "for t in ts: t.join()\n"
        "[os.getuid(), len(ts)]"
    )
    bomb = (
        "import os\n"
        "n = 0\n"
        "while n < 200:\n"
        "    try:\n"
        "        if os.fork() == 0:\n"
        "            import time\n"
        "            time.sleep(5)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        break\n"
        "    n += 1\n"
        "n"
    )
    bombed, *runs = await asyncio.gather(value(rt, bomb), *(value(rt, threads) for _ in range(4)))
    assert bombed < 16  # its own limit stopped it
    uids = [uid for uid, started in runs]
    assert all(started == 10 for _, started in runs)
    assert len(set(uids)) == 4 and all(UID_BASE <= uid < UID_BASE + UID_SLOTS for uid in uids)
