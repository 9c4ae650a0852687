"""Object-store fixtures: every BlobStore kind in STORE_KINDS must pass test_storage_contract.py."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import aioboto3
import pytest

from codemode.storage import BlobStore, FileBlobStore, S3BlobStore
from tests.s3_local import S3Endpoint

STORE_KINDS = ["file", "s3"]


def s3_session(s3: S3Endpoint) -> aioboto3.Session:
    """A session with the test server's keys, so no test depends on the developer's AWS setup."""
    return aioboto3.Session(aws_access_key_id=s3.access_key, aws_secret_access_key=s3.secret_key, region_name=s3.region)


async def open_s3_store(s3: S3Endpoint, bucket: str | None = None, *, create_bucket: bool = False) -> S3BlobStore:
    return await S3BlobStore.open(
        bucket or s3.bucket, endpoint_url=s3.endpoint_url, session=s3_session(s3), create_bucket=create_bucket
    )


@pytest.fixture
async def s3_store(s3_server: S3Endpoint) -> AsyncIterator[S3BlobStore]:
    store = await open_s3_store(s3_server)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture(params=STORE_KINDS)
async def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[BlobStore]:
    if request.param == "file":
        store: BlobStore = FileBlobStore(tmp_path / "blobs")
    else:
        store = await open_s3_store(request.getfixturevalue("s3_server"))
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
def prefix() -> str:
    """A key prefix of its own per test: the S3 bucket is shared by the whole session."""
    return f"t/{uuid.uuid4().hex[:12]}/"
