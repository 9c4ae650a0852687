"""``CodeModePlugin`` beside each agent framework's Temporal plugin, in both orders, on one
client, its worker and a Replayer: the framework keeps its payload converter, ours adds the
object store (external storage) around it, and a workflow that runs code as a child execution
finishes and replays. (Strands: ``tests/strands_env``, its own virtual environment.)"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

import pytest
from temporalio.client import Client
from temporalio.converter import DataConverter, DefaultPayloadConverter, StorageDriver
from temporalio.plugin import SimplePlugin
from temporalio.worker import Replayer, Worker

from codemode.activities import ToolRegistry
from codemode.storage import BlobStore
from codemode.worker.converter import CannotCompose, SharedPydanticPayloadConverter, composed_data_converter, store_of
from codemode.worker.plugin import CodeModePlugin
from tests.integrations.frameworks.composition_workflows import RunsCodeWorkflow


def _openai() -> SimplePlugin:
    from datetime import timedelta

    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents.testing import TestModel, TestModelProvider

    return OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=30)),
        model_provider=TestModelProvider(TestModel.returning_responses([])),
    )


def _adk() -> SimplePlugin:
    from temporalio.google_adk import GoogleAdkPlugin

    return GoogleAdkPlugin()


def _langgraph() -> SimplePlugin:
    from temporalio.langgraph import LangGraphPlugin

    return LangGraphPlugin()


def _deepagents() -> SimplePlugin:
    from temporalio.deepagents import DeepAgentsPlugin

    return DeepAgentsPlugin()


def _payload_converter(name: str) -> type | None:
    """The payload converter class each framework installs over the default (None: none)."""
    if name == "openai":
        from temporalio.openai_agents._temporal_openai_agents import OpenAIPayloadConverter

        return OpenAIPayloadConverter
    if name == "adk":
        from temporalio.google_adk._plugin import _AdkPayloadConverter

        return _AdkPayloadConverter
    if name == "deepagents":
        from temporalio.deepagents._serde import DeepAgentsPayloadConverter

        return DeepAgentsPayloadConverter
    return None


FRAMEWORKS: dict[str, Callable[[], SimplePlugin]] = {
    "openai": _openai,
    "adk": _adk,
    "langgraph": _langgraph,
    "deepagents": _deepagents,
}


@pytest.mark.parametrize("ours_first", [True, False], ids=["codemode-first", "codemode-last"])
@pytest.mark.parametrize("framework", list(FRAMEWORKS))
async def test_codemode_composes_with_the_framework_plugin(
    framework: str, ours_first: bool, temporal_address: str, store: BlobStore, task_queue: str, monkeypatch
) -> None:
    monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
    ours = CodeModePlugin(ToolRegistry.from_module("tests.workflows.tools_under_test"), store=store, tracing=False)
    theirs = FRAMEWORKS[framework]()
    plugins = [ours, theirs] if ours_first else [theirs, ours]
    client = await Client.connect(temporal_address, plugins=plugins)

    converter = client.data_converter
    assert store_of(converter) is store  # our object store is the external storage
    expected = _payload_converter(framework) or SharedPydanticPayloadConverter
    assert converter.payload_converter_class is expected  # theirs kept

    workflow_id = f"composed-{framework}-{uuid.uuid4().hex[:6]}"
    async with Worker(client, task_queue=task_queue, workflows=[RunsCodeWorkflow], max_cached_workflows=0):
        outcome = await client.execute_workflow(
            RunsCodeWorkflow.run, "lookup('Paris')['city']", id=workflow_id, task_queue=task_queue
        )
    assert outcome.success and outcome.output == "Paris", outcome
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    # The same plugin objects on a Replayer (as on the client).
    await Replayer(workflows=[RunsCodeWorkflow], plugins=plugins).replay_workflow(history)
    # A Replayer with plugins of its own, in the order that does not need to see the others.
    if not ours_first:
        fresh = [FRAMEWORKS[framework](), CodeModePlugin(store=store, tracing=False)]
        await Replayer(workflows=[RunsCodeWorkflow], plugins=fresh).replay_workflow(history)


def test_a_converter_that_already_stores_payloads_elsewhere_fails_at_start(store: BlobStore) -> None:
    from temporalio.converter import ExternalStorage

    theirs = dataclasses.replace(DataConverter.default, external_storage=ExternalStorage(drivers=[_ForeignDriver()]))
    with pytest.raises(CannotCompose, match="already stores large payloads externally .*_ForeignDriver"):
        composed_data_converter(theirs, store, keys=None)


def test_encryption_and_another_failure_converter_fail_at_start(store: BlobStore) -> None:
    from temporalio.converter import DefaultFailureConverter

    from codemode.storage.encryption import Keyring

    class TheirFailures(DefaultFailureConverter):
        pass

    theirs = DataConverter(payload_converter_class=DefaultPayloadConverter, failure_converter_class=TheirFailures)
    assert composed_data_converter(theirs, store, keys=None).failure_converter_class is TheirFailures
    with pytest.raises(CannotCompose, match="encryption needs its own failure converter.*TheirFailures"):
        composed_data_converter(theirs, store, keys=Keyring({"k1": bytes(32)}))


class _ForeignDriver(StorageDriver):
    """Another application's claim-check driver (never called: composing fails first)."""

    def name(self) -> str:
        return "foreign"

    async def store(self, context, payloads):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    async def retrieve(self, context, claims):  # type: ignore[no-untyped-def]
        raise NotImplementedError


@pytest.mark.parametrize("accepts_ours", [True, False], ids=["accepts-ours", "refuses-ours"])
async def test_a_later_plugin_that_would_drop_the_encrypted_failure_converter(
    accepts_ours: bool, temporal_address: str, store: BlobStore
) -> None:
    """As Strands' plugin does over the default converter: its payload converter and its failure
    converter. While we encrypt, it keeps ours when it accepts it; else connecting fails."""
    from temporalio.contrib.pydantic import PydanticPayloadConverter
    from temporalio.converter import DefaultFailureConverter

    from codemode.storage.encryption import Keyring
    from codemode.worker.converter import EncryptedFailureConverter

    class TheirFailures(DefaultFailureConverter):
        pass

    def theirs(converter: DataConverter | None) -> DataConverter:
        converter = converter or DataConverter.default
        if converter.payload_converter_class is not DefaultPayloadConverter:
            if accepts_ours:
                return converter
            raise ValueError("only the default")
        return dataclasses.replace(
            converter, payload_converter_class=PydanticPayloadConverter, failure_converter_class=TheirFailures
        )

    ours = CodeModePlugin(store=store, encryption_keys=Keyring({"k1": bytes(32)}), tracing=False)
    plugins = [ours, SimplePlugin("failures", data_converter=theirs)]
    if accepts_ours:
        client = await Client.connect(temporal_address, plugins=plugins)
        assert client.data_converter.failure_converter_class is EncryptedFailureConverter
        assert client.data_converter.payload_converter_class is SharedPydanticPayloadConverter
    else:
        with pytest.raises(CannotCompose, match="cannot compose with failures: .*replaces the failure converter"):
            await Client.connect(temporal_address, plugins=plugins)
