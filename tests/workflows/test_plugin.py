"""``CodeModePlugin`` on its own, as a user adds it to a worker that runs their own workflows;
and beside pydantic-ai's plugin, in both orders, with encryption and external storage on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.worker import Replayer, Worker

from codemode.client.executions import start_execution
from codemode.storage import BlobStore
from codemode.storage.encryption import EncryptionCodec, Keyring, new_key
from codemode.worker.converter import store_of
from codemode.worker.plugin import CodeModePlugin
from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.models import CodeExecutionRequest

from .conftest import TOOLS_MODULE
from .user_workflows import UserAgentWorkflow

#: A tool result over the external-storage threshold (256 KiB): it must go through our store.
LARGE_CODE = "rows = fetch_rows(4000)\nlen(rows)"


async def _aiter(items: list[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def test_plugin_on_the_client_gives_a_users_worker_code_mode(temporal_address: str, store: BlobStore) -> None:
    plugin = CodeModePlugin(tools=TOOLS_MODULE, store=store)
    client = await Client.connect(temporal_address, plugins=[plugin])
    tq = f"agents-{uuid.uuid4().hex[:6]}"
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    # The user's own worker: their workflow only; the client's plugin brings code mode.
    async with Worker(client, task_queue=tq, workflows=[UserAgentWorkflow]):
        result = await client.execute_workflow(
            UserAgentWorkflow.run, "a = add(2, 3)\nb = lookup('Paris')\n[a, b['city']]", id=agent_id, task_queue=tq
        )
        assert result == {"success": True, "output": [5, "Paris"], "calls": ["add", "lookup"]}
        # The same client starts executions directly too, with a result the store must hold.
        outcome = await (await start_execution(client, CodeExecutionRequest(code=LARGE_CODE), task_queue=tq)).result()
    assert outcome.success and outcome.output == 4000
    # Parent and child replay deterministically with what the plugin gives a Replayer.
    histories = [
        await client.get_workflow_handle(wid).fetch_history()
        for wid in (agent_id, f"{agent_id}-code-1", outcome.execution_id)
    ]
    replayer = Replayer(workflows=[UserAgentWorkflow], plugins=[plugin])
    replayed = await replayer.replay_workflows(_aiter(histories), raise_on_replay_failure=False)
    assert replayed.replay_failures == {}


async def test_plugin_on_the_worker_alone(temporal_address: str, client: Client, store: BlobStore) -> None:
    """A client without our converter: the worker uses a copy that has it, so a large result
    still goes to the store (read back here through a client that has it)."""
    plain = await Client.connect(temporal_address)
    tq = f"agents-{uuid.uuid4().hex[:6]}"
    async with Worker(plain, task_queue=tq, plugins=[CodeModePlugin(tools=TOOLS_MODULE, store=store)]) as worker:
        assert store_of(worker.client.data_converter) is store
        handle = await start_execution(client, CodeExecutionRequest(code=LARGE_CODE), task_queue=tq)
        outcome = await handle.result()
    assert outcome.success and outcome.output == 4000


@pytest.mark.parametrize("order", ["pydantic-ai first", "codemode first"])
async def test_beside_pydantic_ais_plugin(temporal_address: str, store: BlobStore, order: str) -> None:
    from pydantic_ai.durable_exec.temporal import PydanticAIPlugin

    keys = Keyring.parse(f"plugin-test:{new_key()}")
    ours = CodeModePlugin(tools=TOOLS_MODULE, store=store, encryption_keys=keys)
    plugins: list[Any] = [PydanticAIPlugin(), ours] if order == "pydantic-ai first" else [ours, PydanticAIPlugin()]
    client = await Client.connect(temporal_address, plugins=plugins)
    converter = client.data_converter
    assert store_of(converter) is store  # external storage kept
    assert isinstance(converter.payload_codec, EncryptionCodec)  # encryption kept
    assert issubclass(converter.payload_converter_class, PydanticPayloadConverter)
    tq = f"agents-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=tq, workflows=[UserAgentWorkflow]) as worker:
        runner = worker.config(active_config=True)["workflow_runner"]
        assert isinstance(runner, CodeModeWorkflowRunner)
        assert "pydantic_ai" in runner.restrictions.passthrough_modules  # pydantic-ai's sandbox settings kept
        outcome = await (await start_execution(client, CodeExecutionRequest(code=LARGE_CODE), task_queue=tq)).result()
        agent = await client.execute_workflow(
            UserAgentWorkflow.run, "add(1, 1)", id=f"agent-{uuid.uuid4().hex[:8]}", task_queue=tq
        )
    assert outcome.success and outcome.output == 4000
    assert agent["output"] == 2


def test_a_client_with_the_plugin_lets_the_sdks_threads_finish_at_exit(temporal_address: str, data_dir) -> None:
    """A short-lived process (a starter, a CLI command) could abort at exit after its work was
    done, while the SDK's threads still talked to Python (temporalio/sdk-python issue 300, seen
    once in our CI with the sample project's starter): a client the plugin configures installs
    the exit hook of ``runtimes/exit_settle.py``."""
    import os
    import subprocess
    import sys

    program = (
        "import asyncio, sys\n"
        "from temporalio.client import Client\n"
        "from codemode import CodeModePlugin\n"
        "from codemode.runtimes import exit_settle\n"
        "assert not exit_settle.installed()\n"
        "asyncio.run(Client.connect(sys.argv[1], plugins=[CodeModePlugin()]))\n"
        "print(exit_settle.installed())\n"
    )
    env = {**os.environ, "CODEMODE_DATA_DIR": str(data_dir)}
    res = subprocess.run([sys.executable, "-c", program, temporal_address], capture_output=True, text=True, env=env)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stderr


async def test_connect_with_the_plugin_leaves_the_converter_and_the_tracing_to_it(temporal_address: str) -> None:
    """``codemode.connect(plugins=[CodeModePlugin(...)])``: Temporal's configuration from the one
    connection module, the converter and the interceptors from the plugin (not twice)."""
    from codemode.worker.connection import connect
    from codemode.worker.converter import store_of

    plugin = CodeModePlugin()
    client = await connect(temporal_address, plugins=[plugin])
    assert store_of(client.data_converter) is plugin.store
    assert len(client.config(active_config=True)["interceptors"]) == len(CodeModePlugin._interceptors(None))


async def test_the_workflow_cache_size_from_the_environment(
    temporal_address: str, client: Client, store: BlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CODEMODE_MAX_CACHED_WORKFLOWS`` sizes the SDK's workflow cache of a worker with the
    plugin (parked runs then cost the worker nothing while they wait); a size given in code is
    kept; a value that is not a size stops the worker from starting, naming the variable."""
    tq = f"agents-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("CODEMODE_MAX_CACHED_WORKFLOWS", "0")
    async with Worker(client, task_queue=tq, plugins=[CodeModePlugin(tools=TOOLS_MODULE, store=store)]) as worker:
        config = worker.config(active_config=True)
        assert config["max_cached_workflows"] == 0
        assert config["max_concurrent_workflow_tasks"] == 1  # no cache: one task at a time
        code = f"a = add({uuid.uuid4().int % 1000}, 1)\nb = add(a, 1)\nb - a"
        outcome = await (await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)).result()
    assert outcome.success and outcome.output == 1
    monkeypatch.setenv("CODEMODE_MAX_CACHED_WORKFLOWS", "25")

    def cache_of(**given: Any) -> int:
        plugin = CodeModePlugin(tools=TOOLS_MODULE, store=store)
        worker = Worker(client, task_queue=f"{tq}-{uuid.uuid4().hex[:6]}", plugins=[plugin], **given)
        return worker.config(active_config=True)["max_cached_workflows"]

    assert cache_of() == 25
    assert cache_of(max_cached_workflows=7) == 7
    monkeypatch.setenv("CODEMODE_MAX_CACHED_WORKFLOWS", "lots")
    with pytest.raises(ValueError, match="CODEMODE_MAX_CACHED_WORKFLOWS='lots': expected a whole number"):
        cache_of()
