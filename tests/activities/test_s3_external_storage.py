"""The SDK's own S3StorageDriver running on our S3BlobStore against SeaweedFS: in a pydantic
data converter, and end to end through a real Temporal dev server."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from pydantic import BaseModel
from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, ExternalStorage
from temporalio.worker import Worker

with workflow.unsafe.imports_passed_through():
    from codemode.storage import BlobNotFound, S3BlobStore, key_segment

REFERENCE_TYPE = b"temporal.api.sdk.v1.ExternalStorageReference"
SIZE = 3_000_000


def s3_converter(store: S3BlobStore) -> DataConverter:
    """Our pydantic converter with the SDK's S3 driver over the store (default 256 KiB threshold)."""
    driver = S3StorageDriver(client=store, bucket=store.bucket, driver_name=store.driver_name)
    return dataclasses.replace(pydantic_data_converter, external_storage=ExternalStorage(drivers=[driver]))


class Rows(BaseModel):
    text: str


class Summary(BaseModel):
    length: int
    sha256: str


def three_megabytes() -> str:
    return "".join(f"{i:08d}" for i in range(SIZE // 8))


async def test_converter_round_trips_3_mb_through_a_reference(s3_store: S3BlobStore) -> None:
    converter = s3_converter(s3_store)
    value = Rows(text=three_megabytes())

    [payload] = await converter.encode([value])

    assert payload.metadata["messageType"] == REFERENCE_TYPE
    assert payload.ByteSize() < 1024, "the payload is a reference, not the data"
    reference = json.loads(payload.data)
    assert reference["driverName"] == "aws.s3driver"
    claim = reference["claimData"]
    assert claim["bucket"] == s3_store.bucket and claim["hash_algorithm"] == "sha256"
    stored = await s3_store.get_object(bucket=s3_store.bucket, key=claim["key"])
    assert len(stored) > SIZE and hashlib.sha256(stored).hexdigest() == claim["hash_value"]

    [back] = await converter.decode([payload], [Rows])
    assert back == value

    # Small values stay inline.
    [small] = await converter.encode([Rows(text="tiny")])
    assert small.metadata.get("messageType") != REFERENCE_TYPE

    # A reference whose object is gone fails to decode, naming the key.
    await s3_store.delete_objects(bucket=s3_store.bucket, keys=[claim["key"]])
    with pytest.raises(RuntimeError, match="retrieve failed") as e:
        await converter.decode([payload], [Rows])
    assert isinstance(e.value.__cause__, BlobNotFound)


@activity.defn
async def produce_rows() -> Rows:
    return Rows(text=three_megabytes())


@workflow.defn
class BigResultWorkflow:
    """Receives a 3 MB activity result: over the server's 2 MB payload limit when inline."""

    @workflow.run
    async def run(self) -> Summary:
        rows = await workflow.execute_activity(produce_rows, start_to_close_timeout=timedelta(seconds=60))
        return Summary(length=len(rows.text), sha256=hashlib.sha256(rows.text.encode()).hexdigest())


@pytest.fixture
async def s3_client(client: Client, s3_store: S3BlobStore) -> AsyncIterator[Client]:
    """A client on the session's dev server whose converter offloads to SeaweedFS."""
    config = client.config()
    config["data_converter"] = s3_converter(s3_store)
    yield Client(**config)


async def test_activity_result_travels_through_s3(s3_client: Client, s3_store: S3BlobStore) -> None:
    task_queue = f"s3-{uuid.uuid4().hex[:8]}"
    workflow_id = f"big result {uuid.uuid4().hex[:8]}"  # a space: percent-encoded in the key
    async with Worker(s3_client, task_queue=task_queue, workflows=[BigResultWorkflow], activities=[produce_rows]):
        handle = await s3_client.start_workflow(BigResultWorkflow.run, id=workflow_id, task_queue=task_queue)
        summary = await handle.result()

    expected = three_megabytes()
    assert summary == Summary(length=len(expected), sha256=hashlib.sha256(expected.encode()).hexdigest())

    history = await handle.fetch_history()
    [completed] = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED]
    [result] = completed.activity_task_completed_event_attributes.result.payloads
    assert result.metadata["messageType"] == REFERENCE_TYPE
    assert result.ByteSize() < 1024
    assert len(history.to_json()) < 100_000, "the history holds references, not the 3 MB"

    # The object is where the SDK's key scheme says, under this run's prefix.
    key = json.loads(result.data)["claimData"]["key"]
    run_prefix = f"v0/ns/default/wt/BigResultWorkflow/wi/{key_segment(workflow_id)}/ri/{handle.result_run_id}/"
    assert key.startswith(run_prefix)
    assert await s3_store.list_keys(bucket=s3_store.bucket, prefix=run_prefix) == [key]

    info = (await handle.describe()).raw_description.workflow_execution_info
    assert info.external_payload_count >= 1 and info.external_payload_size_bytes > SIZE
