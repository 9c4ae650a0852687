"""S3BlobStore against SeaweedFS: what goes over the wire, batching, and the errors an
operator sees for a wrong endpoint, bucket or credential."""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

import aioboto3
import pytest

from codemode.storage import BlobStoreError, BucketNotFound, S3BlobStore
from tests.activities.conftest import open_s3_store
from tests.s3_local import S3Endpoint

MiB = 1024 * 1024


class Wire:
    """Every request the store's client sends: (operation, method, url, headers)."""

    def __init__(self, store: S3BlobStore) -> None:
        self.requests: list[tuple[str, str, str, dict[str, str]]] = []
        store.client.meta.events.register("before-send.s3", self._record)

    def _record(self, request: Any, event_name: str, **_: Any) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        self.requests.append((operation, request.method, request.url, headers))

    def of(self, operation: str) -> list[tuple[str, str, str, dict[str, str]]]:
        return [r for r in self.requests if r[0] == operation]


@pytest.fixture
def unique_bucket() -> Iterator[str]:
    yield f"codemode-{uuid.uuid4().hex[:12]}"


async def test_requests_are_path_style_without_flexible_checksums(s3_store: S3BlobStore, prefix: str) -> None:
    wire = Wire(s3_store)
    await s3_store.put_object(bucket=s3_store.bucket, key=f"{prefix}small", data=b"x" * 1000)
    await s3_store.put_object(bucket=s3_store.bucket, key=f"{prefix}multi", data=b"y" * (9 * MiB))
    assert await s3_store.get_object(bucket=s3_store.bucket, key=f"{prefix}multi") == b"y" * (9 * MiB)

    assert len(wire.of("UploadPart")) == 2, "9 MiB goes up in two parts"
    for operation, _method, url, headers in wire.requests:
        # http://127.0.0.1:PORT/bucket/key, not http://bucket.127.0.0.1:PORT/key
        assert url.startswith(f"{s3_store.endpoint_url}/{s3_store.bucket}/"), (operation, url)
        lowered = {k.lower(): v for k, v in headers.items()}
        assert not any(k.startswith("x-amz-checksum-") for k in lowered), (operation, headers)
        assert "aws-chunked" not in lowered.get("content-encoding", ""), (operation, headers)
        assert lowered.get("x-amz-checksum-mode") is None, (operation, headers)


async def test_delete_objects_sends_content_md5(s3_store: S3BlobStore, prefix: str) -> None:
    wire = Wire(s3_store)
    bodies: list[bytes] = []
    s3_store.client.meta.events.register(
        "before-send.s3.DeleteObjects", lambda request, **_: bodies.append(request.body)
    )
    await s3_store.put_object(bucket=s3_store.bucket, key=f"{prefix}a", data=b"a")
    await s3_store.delete_objects(bucket=s3_store.bucket, keys=[f"{prefix}a"])
    [(_, _, _, headers)] = wire.of("DeleteObjects")
    assert headers["Content-MD5"] == base64.b64encode(hashlib.md5(bodies[0]).digest()).decode()
    assert not await s3_store.object_exists(bucket=s3_store.bucket, key=f"{prefix}a")


async def test_deletes_in_batches_and_lists_in_pages(s3_store: S3BlobStore, prefix: str) -> None:
    s3_store.delete_batch_size = 2  # S3's limit is 1000; smaller here to see the batching
    s3_store.list_page_size = 2
    keys = [f"{prefix}k{i}" for i in range(5)]
    for k in keys:
        await s3_store.put_object(bucket=s3_store.bucket, key=k, data=k.encode())
    wire = Wire(s3_store)
    assert await s3_store.list_keys(bucket=s3_store.bucket, prefix=prefix) == keys
    assert len(wire.of("ListObjectsV2")) == 3
    assert await s3_store.delete_prefix(bucket=s3_store.bucket, prefix=prefix) == 5
    assert len(wire.of("DeleteObjects")) == 3
    assert await s3_store.list_keys(bucket=s3_store.bucket, prefix=prefix) == []


async def test_missing_bucket_is_a_clear_error(s3_server: S3Endpoint, unique_bucket: str) -> None:
    with pytest.raises(BucketNotFound) as e:
        await open_s3_store(s3_server, unique_bucket)
    message = str(e.value)
    assert unique_bucket in message and s3_server.endpoint_url in message
    assert "CODEMODE_S3_CREATE_BUCKET" in message


async def test_create_bucket_when_asked(s3_server: S3Endpoint, unique_bucket: str) -> None:
    store = await open_s3_store(s3_server, unique_bucket, create_bucket=True)
    try:
        await store.put_object(bucket=unique_bucket, key="k", data=b"v")
        assert await store.get_object(bucket=unique_bucket, key="k") == b"v"
        # A second worker opening the same store with create_bucket finds it there.
        again = await open_s3_store(s3_server, unique_bucket, create_bucket=True)
        await again.aclose()
    finally:
        await store.delete_prefix(bucket=unique_bucket, prefix="")
        await store.client.delete_bucket(Bucket=unique_bucket)
        await store.aclose()


async def test_bucket_gone_underneath_is_not_a_missing_key(s3_store: S3BlobStore, unique_bucket: str) -> None:
    with pytest.raises(BucketNotFound, match=unique_bucket):
        await s3_store.get_object(bucket=unique_bucket, key="k")
    with pytest.raises(BucketNotFound, match=unique_bucket):
        await s3_store.put_object(bucket=unique_bucket, key="k", data=b"v")


async def test_unreachable_endpoint_names_endpoint_and_bucket(unused_tcp_port: int) -> None:
    endpoint = f"http://127.0.0.1:{unused_tcp_port}"
    session = aioboto3.Session(aws_access_key_id="k", aws_secret_access_key="s")
    with pytest.raises(BlobStoreError) as e:
        await S3BlobStore.open("some-bucket", endpoint_url=endpoint, session=session)
    assert "cannot reach" in str(e.value) and endpoint in str(e.value) and "some-bucket" in str(e.value)


async def test_wrong_secret_is_access_denied(s3_server: S3Endpoint) -> None:
    session = aioboto3.Session(aws_access_key_id=s3_server.access_key, aws_secret_access_key="wrong")
    with pytest.raises(BlobStoreError, match="denied") as e:
        await S3BlobStore.open(s3_server.bucket, endpoint_url=s3_server.endpoint_url, session=session)
    assert s3_server.endpoint_url in str(e.value) and s3_server.bucket in str(e.value)


async def test_no_credentials_anywhere(s3_server: S3Endpoint, monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    with pytest.raises(BlobStoreError, match="no AWS credentials") as e:
        await S3BlobStore.open(s3_server.bucket, endpoint_url=s3_server.endpoint_url)
    assert "AWS_ACCESS_KEY_ID" in str(e.value) and s3_server.endpoint_url in str(e.value)


async def test_describe_feeds_the_sdk_driver_errors(s3_store: S3BlobStore) -> None:
    assert s3_store.describe() == {"endpoint": s3_store.endpoint_url, "region": "us-east-1"}
    assert s3_store.location() == f"s3://{s3_store.bucket} at {s3_store.endpoint_url}"
