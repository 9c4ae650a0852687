"""Runtime contract fixtures: every runtime in RUNTIME_FACTORIES must pass tests/runtimes/test_contract.py.

A factory is an async context manager factory yielding a fresh CodeRuntime. New runtimes
(python with each transport, e2b with its fake cloud boundary) add an entry here.

``e2b``, ``blaxel`` and ``modal`` run the real SDKs against local compatible servers
(``tests/e2b_local``, ``tests/blaxel_local``, ``tests/modal_local``), each started once per
session on first use; after every test that used one, no sandbox may be left on it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from codemode.runtimes import CodeRuntime
from tests.blaxel_local import LocalBlaxelServer
from tests.e2b_local import LocalE2BServer
from tests.modal_local import IMAGE_ID, LocalModalServer

_LOCAL_E2B: LocalE2BServer | None = None
_LOCAL_BLAXEL: LocalBlaxelServer | None = None
_LOCAL_MODAL: LocalModalServer | None = None


def local_e2b() -> LocalE2BServer:
    """The session's local E2B server (started on first use, stopped by ``_stop_local_e2b``)."""
    global _LOCAL_E2B
    if _LOCAL_E2B is None:
        _LOCAL_E2B = LocalE2BServer().start()
    return _LOCAL_E2B


def e2b_runtime(**options: Any) -> Any:
    """An ``E2BRuntime`` on the local server (credentials as arguments: no global env)."""
    from codemode.runtimes.e2b import E2BRuntime

    server = local_e2b()
    return E2BRuntime(api_key="local-test-key", api_url=server.url, sandbox_url=server.url, **options)


@contextlib.asynccontextmanager
async def _e2b() -> AsyncIterator[CodeRuntime]:
    rt = e2b_runtime()
    try:
        yield rt
    finally:
        await rt.aclose()


async def e2b_sandboxes() -> list[Any]:
    """Every sandbox of the local server (running or paused)."""
    from e2b_code_interpreter import E2B

    server = local_e2b()
    client = E2B(api_key="local-test-key", api_url=server.url, sandbox_url=server.url)
    return await client.AsyncSandbox.list().next_items()


@pytest.fixture(scope="session", autouse=True)
def _stop_local_e2b() -> Iterator[None]:
    yield
    global _LOCAL_E2B
    if _LOCAL_E2B is not None:
        _LOCAL_E2B.stop()
        _LOCAL_E2B = None


@pytest.fixture(autouse=True)
async def _no_sandbox_left() -> AsyncIterator[None]:
    """After a test that used the local E2B server, nothing may be left on it."""
    yield
    if _LOCAL_E2B is None:
        return
    left = await e2b_sandboxes()
    if left:
        from e2b_code_interpreter import E2B

        client = E2B(api_key="local-test-key", api_url=_LOCAL_E2B.url, sandbox_url=_LOCAL_E2B.url)
        for info in left:
            await client.AsyncSandbox.kill(info.sandbox_id)
        pytest.fail(f"sandboxes left on the local E2B server: {[(i.sandbox_id, i.state.value) for i in left]}")


def local_blaxel() -> LocalBlaxelServer:
    """The session's local Blaxel server (started on first use)."""
    global _LOCAL_BLAXEL
    if _LOCAL_BLAXEL is None:
        _LOCAL_BLAXEL = LocalBlaxelServer().start()
    return _LOCAL_BLAXEL


def blaxel_runtime(**options: Any) -> Any:
    """A ``BlaxelRuntime`` on the local server (credentials as arguments: no global env)."""
    from codemode.runtimes.blaxel import BlaxelRuntime

    server = local_blaxel()
    return BlaxelRuntime(api_key="local-test-key", workspace="local", api_url=server.url, region="local", **options)


@contextlib.asynccontextmanager
async def _blaxel() -> AsyncIterator[CodeRuntime]:
    rt = blaxel_runtime()
    try:
        yield rt
    finally:
        await rt.aclose()


async def blaxel_sandboxes(server: LocalBlaxelServer | None = None) -> dict[str, str]:
    """Name -> status of every sandbox on the local Blaxel server, asked over HTTP."""
    import aiohttp

    server = server or local_blaxel()
    headers = {"X-Blaxel-Authorization": "Bearer local-test-key", "X-Blaxel-Workspace": "local"}
    async with aiohttp.ClientSession(headers=headers) as http, http.get(f"{server.url}/sandboxes") as resp:
        listed = await resp.json()
    return {s["metadata"]["name"]: s["status"] for s in listed["data"]}


async def delete_blaxel_sandbox(name: str, server: LocalBlaxelServer | None = None) -> bool:
    """Delete a sandbox behind the runtime's back (expired, deleted by someone)."""
    import aiohttp

    server = server or local_blaxel()
    headers = {"X-Blaxel-Authorization": "Bearer local-test-key", "X-Blaxel-Workspace": "local"}
    async with aiohttp.ClientSession(headers=headers) as http, http.delete(f"{server.url}/sandboxes/{name}") as resp:
        return resp.status == 200


@pytest.fixture(scope="session", autouse=True)
def _stop_local_blaxel() -> Iterator[None]:
    yield
    global _LOCAL_BLAXEL
    if _LOCAL_BLAXEL is not None:
        _LOCAL_BLAXEL.stop()
        _LOCAL_BLAXEL = None


@pytest.fixture(autouse=True)
async def _no_blaxel_sandbox_left() -> AsyncIterator[None]:
    """After a test that used the local Blaxel server, nothing may be left on it."""
    yield
    if _LOCAL_BLAXEL is None:
        return
    left = await blaxel_sandboxes()
    for name in left:
        await delete_blaxel_sandbox(name)
    if left:
        pytest.fail(f"sandboxes left on the local Blaxel server: {left}")


def local_modal() -> LocalModalServer:
    """The session's local Modal server (started on first use). The SDK reads its server from
    MODAL_SERVER_URL (no argument for it), so this process's environment points there."""
    global _LOCAL_MODAL
    if _LOCAL_MODAL is None:
        _LOCAL_MODAL = LocalModalServer().start()
        for key in ("MODAL_SERVER_URL", "MODAL_CONFIG_PATH"):
            os.environ[key] = _LOCAL_MODAL.env[key]
    return _LOCAL_MODAL


def modal_runtime(**options: Any) -> Any:
    """A ``ModalRuntime`` on the local server (the token as arguments)."""
    from codemode.runtimes.modal import ModalRuntime

    local_modal()
    return ModalRuntime(token_id="ak-local", token_secret="as-local", image=IMAGE_ID, **options)


@contextlib.asynccontextmanager
async def _modal() -> AsyncIterator[CodeRuntime]:
    rt = modal_runtime()
    try:
        yield rt
    finally:
        await rt.aclose()


async def modal_sandboxes() -> list[str]:
    """The ids of the local Modal server's running sandboxes (through the SDK)."""
    import modal

    local_modal()
    client = await modal.Client.from_credentials.aio("ak-local", "as-local")
    app = await modal.App.lookup.aio("codemode", create_if_missing=True, client=client)
    return [s.object_id async for s in modal.Sandbox.list.aio(app_id=app.app_id, client=client)]


async def terminate_modal_sandbox(sandbox_id: str) -> None:
    """Terminate a sandbox behind the runtime's back (expired, terminated by someone)."""
    import modal

    client = await modal.Client.from_credentials.aio("ak-local", "as-local")
    await (await modal.Sandbox.from_id.aio(sandbox_id, client=client)).terminate.aio()


@pytest.fixture(scope="session", autouse=True)
def _stop_local_modal() -> Iterator[None]:
    yield
    global _LOCAL_MODAL
    if _LOCAL_MODAL is not None:
        _LOCAL_MODAL.stop()
        _LOCAL_MODAL = None


@pytest.fixture(autouse=True)
async def _no_modal_sandbox_left() -> AsyncIterator[None]:
    """After a test that used the local Modal server, no sandbox may still run on it."""
    yield
    if _LOCAL_MODAL is None:
        return
    left = await modal_sandboxes()
    for sandbox_id in left:
        await terminate_modal_sandbox(sandbox_id)
    if left:
        pytest.fail(f"sandboxes left running on the local Modal server: {left}")


def docker_runtime(**options: Any) -> Any:
    """A ``DockerRuntime`` on the session's podman service and test image."""
    from codemode.runtimes.docker import DockerRuntime
    from tests.docker_engine import IMAGE, engine

    return DockerRuntime(image=IMAGE, base_url=engine().url, **options)


@contextlib.asynccontextmanager
async def _docker() -> AsyncIterator[CodeRuntime]:
    rt = docker_runtime()
    try:
        yield rt
    finally:
        await rt.aclose()


@pytest.fixture(autouse=True)
def _no_container_left() -> Iterator[None]:
    """After a test that used the container engine, no codemode container may be left."""
    yield
    from tests.docker_engine import codemode_containers, engine_started, remove_containers

    if not engine_started():
        return
    left = codemode_containers()
    if left:
        remove_containers([c["Id"] for c in left])
        pytest.fail(f"containers left on the engine: {[(c['Id'][:12], c.get('State')) for c in left]}")


@contextlib.asynccontextmanager
async def _monty() -> AsyncIterator[CodeRuntime]:
    from codemode.runtimes.monty import MontyRuntime

    rt = MontyRuntime()
    try:
        yield rt
    finally:
        await rt.aclose()


@contextlib.asynccontextmanager
async def _python(transport: str) -> AsyncIterator[CodeRuntime]:
    from codemode.runtimes.python import PythonRuntime

    rt = PythonRuntime(transport=transport, isolation="bwrap")
    try:
        yield rt
    finally:
        await rt.aclose()


_PYODIDE: Any = None


def shared_pyodide() -> Any:
    """The session's ``PyodideRuntime``: its warm processes serve every test (a process
    serves one execution; the pool starts the next one in the background)."""
    global _PYODIDE
    if _PYODIDE is None:
        from codemode.runtimes.pyodide import PyodideRuntime

        _PYODIDE = PyodideRuntime(pool_size=2)
    return _PYODIDE


@contextlib.asynccontextmanager
async def _pyodide() -> AsyncIterator[CodeRuntime]:
    rt = shared_pyodide()
    try:
        yield rt
    finally:
        await rt.close_executions()


@pytest.fixture(scope="session", autouse=True)
async def _stop_shared_pyodide() -> AsyncIterator[None]:
    yield
    global _PYODIDE
    if _PYODIDE is not None:
        await _PYODIDE.aclose()
        _PYODIDE = None


#: name -> zero-argument callable returning an async context manager of a CodeRuntime.
RUNTIME_FACTORIES: dict[str, Callable[[], Any]] = {
    "monty": _monty,
    "python-stdio": lambda: _python("stdio"),
    "python-http": lambda: _python("http"),
    "e2b": _e2b,
    "blaxel": _blaxel,
    "modal": _modal,
    "docker": _docker,
    "pyodide": _pyodide,
}


@pytest.fixture(params=sorted(RUNTIME_FACTORIES))
def runtime_factory(request: pytest.FixtureRequest) -> Callable[[], Any]:
    """Parametrizes a test over every runtime; use ``async with runtime_factory() as rt``."""
    return RUNTIME_FACTORIES[request.param]
