"""BlaxelRuntime and ModalRuntime beyond the contract, each on its local compatible server
driven by the unmodified SDK: the sandbox is the checkpoint, a sandbox that is gone is
refused with the reason, the orphan sweep, the network switch, no credential in the
sandbox, and the settings errors. A fresh runtime instance stands for another worker."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from codemode.runtimes import CodeExecution, ExecutionResult, FunctionCall, SandboxOptions
from codemode.runtimes.checkpoint import read_header
from codemode.runtimes.errors import CodeRuntimeError

from .conftest import (
    blaxel_runtime,
    blaxel_sandboxes,
    delete_blaxel_sandbox,
    local_blaxel,
    local_modal,
    modal_runtime,
    modal_sandboxes,
    terminate_modal_sandbox,
)

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60.0
T = TypeVar("T")
CODE = "print('started')\na = get(1)\nprint('got', a)\nb = get(2)\n[a, b]\n"
PROVIDERS = ["blaxel", "modal"]


async def guarded(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, HANG_GUARD_S)


def runtime(name: str, **options: Any) -> Any:
    return blaxel_runtime(**options) if name == "blaxel" else modal_runtime(**options)


async def names(name: str) -> list[str]:
    return list(await blaxel_sandboxes()) if name == "blaxel" else await modal_sandboxes()


async def delete(name: str, sandbox: str) -> None:
    await (delete_blaxel_sandbox(sandbox) if name == "blaxel" else terminate_modal_sandbox(sandbox))


def sandbox_of(blob: bytes) -> str:
    header = read_header(blob)
    assert header is not None
    meta = header["meta"]
    return str(meta.get("sandbox") or meta.get("sandbox_id"))


@pytest.fixture(params=PROVIDERS)
async def provider(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    yield request.param


async def first_call(rt: Any) -> tuple[CodeExecution, FunctionCall, bytes]:
    execution = await guarded(rt.execute(CODE, functions=["get"]))
    batch = await guarded(execution.next_batch())
    assert isinstance(batch, list) and [c.args for c in batch] == [[1]]
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


async def value(rt: Any, code: str, **kw: Any) -> Any:
    execution = await guarded(rt.execute(code, functions=[], **kw))
    async with execution:
        result = await guarded(execution.next_batch())
    assert isinstance(result, ExecutionResult)
    return result.output


async def test_a_fresh_runtime_goes_on_in_the_same_sandbox_twice(provider: str) -> None:
    """Each restore's stream shows what was written before again (Blaxel's log stream, a
    Modal from_id handle): the output mark skips it, so nothing is repeated."""
    worker_a = runtime(provider)
    execution, call, blob = await first_call(worker_a)
    assert len(blob) < 2048  # ids and a position, no heap
    await execution.close()  # the checkpoint is current: only detaches
    await worker_a.aclose()
    assert await names(provider) == [sandbox_of(blob)]
    await asyncio.sleep(1.5)  # the Blaxel fake puts an idle sandbox in standby (SIGSTOP)

    worker_b = runtime(provider)
    restored = await guarded(worker_b.restore(blob))
    assert restored is not None
    await restored.provide_result(100, call_id=call.call_id)
    batch = await guarded(restored.next_batch())
    assert isinstance(batch, list) and [c.args for c in batch] == [[2]]
    second = restored.dump()
    assert second is not None and restored.stdout == "got 100\n"
    await restored.close()
    await worker_b.aclose()

    worker_c = runtime(provider)  # a third worker: the stream replays both earlier steps
    again = await guarded(worker_c.restore(second))
    assert again is not None
    await again.provide_result(200, call_id=batch[0].call_id)
    result = await guarded(again.next_batch())
    assert isinstance(result, ExecutionResult) and result.output == [100, 200]
    assert result.stdout == ""  # nothing printed after the last checkpoint, nothing replayed
    await worker_c.aclose()
    assert await names(provider) == []


async def test_code_that_ends_the_interpreter_is_told_with_its_exit_status(provider: str) -> None:
    """The provider's own exit code reaches the error (Modal's ``wait`` returns nothing: the
    code is read from the sandbox after it; it read "exit status None" for every death)."""
    rt = runtime(provider)
    with pytest.raises(CodeRuntimeError, match=r"ended the interpreter \(exit status 3\)"):
        await value(rt, "import os\nos._exit(3)")


async def test_a_deleted_sandbox_is_refused_with_the_reason(provider: str) -> None:
    rt = runtime(provider)
    execution, _, blob = await first_call(rt)
    await execution.close()
    await delete(provider, sandbox_of(blob))
    other = runtime(provider)
    assert await guarded(other.restore(blob)) is None  # the caller replays the journal
    assert "is gone" in other.restore_refusal(blob) and sandbox_of(blob) in other.restore_refusal(blob)
    await other.discard(blob)  # gone already: no error
    await other.aclose()
    await rt.aclose()


async def test_the_sweep_keeps_parked_runs_until_max_age(provider: str) -> None:
    rt = runtime(provider)
    execution, _, blob = await first_call(rt)
    await execution.close()  # parked: detached, the sandbox kept
    other = runtime(provider)
    assert await other.sweep() == []  # a parked run may still go on
    assert await other.sweep(max_age=timedelta(0)) == [sandbox_of(blob)]  # past every approval timeout
    assert await names(provider) == []
    await other.aclose()
    await rt.aclose()


@pytest.mark.parametrize("network", ["none", "full"])
async def test_the_network_is_off_unless_asked_for(provider: str, network: str) -> None:
    rt = runtime(provider)
    code = "import socket\nsorted(name for _, name in socket.if_nameindex())"
    interfaces = await value(rt, code, options=SandboxOptions(network=network))
    assert (interfaces == ["lo"]) is (network == "none")
    await rt.aclose()


async def test_no_credential_or_api_address_enters_the_sandbox(provider: str) -> None:
    server = local_blaxel() if provider == "blaxel" else local_modal()
    rt = runtime(provider)
    seen = await value(rt, "import os\ndict(os.environ)")
    blob = json.dumps(seen)
    assert "local-test-key" not in blob and "as-local" not in blob  # no secret...
    assert server.url.split("//")[1] not in blob  # ...and not where the API is
    assert not any(k.startswith(("BL_", "MODAL_")) for k in seen)
    await rt.aclose()


def test_missing_credentials_are_a_clear_error(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from codemode.runtimes import get_runtime

    for key in ("BL_API_KEY", "BL_WORKSPACE", "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    wanted = ("BL_API_KEY", "BL_WORKSPACE") if provider == "blaxel" else ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET")
    with pytest.raises(ValueError) as info:  # the activity reports it in-band, as an input error
        get_runtime(provider)
    assert all(key in str(info.value) for key in wanted)


@pytest.mark.parametrize(("name", "sdk"), [("blaxel", "blaxel"), ("modal", "modal")])
def test_a_missing_sdk_names_the_extra(name: str, sdk: str) -> None:
    probe = textwrap.dedent(
        f"""
        import importlib.abc, json, sys

        class NoSDK(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ({sdk!r}, "modal_proto"):
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
                return None

        sys.meta_path.insert(0, NoSDK())
        from codemode import runtimes
        try:
            runtimes.get_runtime({name!r})
        except ImportError as err:
            print(json.dumps(str(err)))
        """
    )
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"pip install 'durable-codemode[{name}]'" in json.loads(proc.stdout)


async def test_modal_entrypoint_stdin_from_a_second_handle_is_taken_for_a_retry() -> None:
    """Why the modal runtime writes through a relay exec: the entrypoint's stdin is written by
    byte offset, and a ``from_id`` handle's writer starts at 0, so its bytes are taken for a
    retry of what the first handle wrote and dropped (the local server keeps Modal's offset
    semantics)."""
    import modal

    from tests.modal_local import IMAGE_ID

    local_modal()
    client = await modal.Client.from_credentials.aio("ak-local", "as-local")
    app = await modal.App.lookup.aio("codemode", create_if_missing=True, client=client)
    echo = "import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)"
    first = await modal.Sandbox.create.aio(
        "python3", "-c", echo, app=app, image=modal.Image.from_id(IMAGE_ID), client=client
    )
    try:
        first.stdin.write(b"one\n")
        await first.stdin.drain.aio()
        second = await modal.Sandbox.from_id.aio(first.object_id, client=client)
        second.stdin.write(b"two\n")  # offset 0 again
        await second.stdin.drain.aio()
        first.stdin.write(b"three\n")
        await first.stdin.drain.aio()
        first.stdin.write_eof()
        await first.stdin.drain.aio()
        out = await guarded(first.stdout.read.aio())
    finally:
        await first.terminate.aio()
    assert out == "got one\ngot three\n"


@pytest.mark.parametrize("provider_name", PROVIDERS)
def test_registry_names_them(provider_name: str) -> None:
    from codemode.runtimes import RUNTIMES

    assert RUNTIMES[provider_name].startswith(f"codemode.runtimes.{provider_name}:")
    assert os.environ.get("E2B_DEBUG") is None
