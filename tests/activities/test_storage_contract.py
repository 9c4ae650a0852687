"""The BlobStore contract: the file store and a real S3-compatible store (SeaweedFS) behave alike."""

from __future__ import annotations

import hashlib
import os

import pytest

from codemode.storage import BlobNotFound, BlobStore, key_segment

MiB = 1024 * 1024


async def test_put_get_exists(blob_store: BlobStore, prefix: str) -> None:
    key = f"{prefix}a/b"
    assert not await blob_store.object_exists(bucket=blob_store.bucket, key=key)
    await blob_store.put_object(bucket=blob_store.bucket, key=key, data=b"hello")
    assert await blob_store.object_exists(bucket=blob_store.bucket, key=key)
    assert await blob_store.get_object(bucket=blob_store.bucket, key=key) == b"hello"


async def test_empty_object(blob_store: BlobStore, prefix: str) -> None:
    key = f"{prefix}empty"
    await blob_store.put_object(bucket=blob_store.bucket, key=key, data=b"")
    assert await blob_store.object_exists(bucket=blob_store.bucket, key=key)
    assert await blob_store.get_object(bucket=blob_store.bucket, key=key) == b""


async def test_overwrite_replaces(blob_store: BlobStore, prefix: str) -> None:
    key = f"{prefix}k"
    await blob_store.put_object(bucket=blob_store.bucket, key=key, data=b"first, and longer")
    await blob_store.put_object(bucket=blob_store.bucket, key=key, data=b"second")
    assert await blob_store.get_object(bucket=blob_store.bucket, key=key) == b"second"


async def test_missing_key_raises_blob_not_found(blob_store: BlobStore, prefix: str) -> None:
    with pytest.raises(BlobNotFound, match="no object"):
        await blob_store.get_object(bucket=blob_store.bucket, key=f"{prefix}never-stored")
    assert not await blob_store.object_exists(bucket=blob_store.bucket, key=f"{prefix}never-stored")


async def test_percent_encoded_keys_list_and_delete(blob_store: BlobStore, prefix: str) -> None:
    # Segments as the SDK's driver writes them: '/', ' ', '%', non-ASCII all percent-encoded.
    wid = key_segment("order 42/ünïcode %done")
    assert wid == "order%2042%2F%C3%BCn%C3%AFcode%20%25done"
    run = f"{prefix}wi/{wid}/"
    keys = [f"{run}cp/{h}" for h in ("aa", "bb", "cc")] + [f"{run}d/sha256/{'0' * 64}"]
    other = f"{prefix}wi/{key_segment('order 42')}/cp/aa"  # a sibling whose id is a prefix of ours
    for k in [*keys, other]:
        await blob_store.put_object(bucket=blob_store.bucket, key=k, data=k.encode())

    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=run) == sorted(keys)
    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=f"{run}cp/") == sorted(keys[:3])
    # A prefix that ends inside a segment matches like S3's: by string prefix.
    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=f"{run}cp/b") == [f"{run}cp/bb"]
    for k in keys:
        assert await blob_store.get_object(bucket=blob_store.bucket, key=k) == k.encode()

    await blob_store.delete_objects(bucket=blob_store.bucket, keys=[keys[0], f"{run}cp/not-there"])
    assert not await blob_store.object_exists(bucket=blob_store.bucket, key=keys[0])
    await blob_store.delete_objects(bucket=blob_store.bucket, keys=[])

    assert await blob_store.delete_prefix(bucket=blob_store.bucket, prefix=run) == 3
    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=run) == []
    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=prefix) == [other]
    assert await blob_store.get_object(bucket=blob_store.bucket, key=other) == other.encode()


async def test_list_unknown_prefix_is_empty(blob_store: BlobStore, prefix: str) -> None:
    assert await blob_store.list_keys(bucket=blob_store.bucket, prefix=f"{prefix}nothing/here/") == []
    assert await blob_store.delete_prefix(bucket=blob_store.bucket, prefix=f"{prefix}nothing/") == 0


async def test_64_mib_object(blob_store: BlobStore, prefix: str) -> None:
    """Above S3's multipart threshold (8 MiB parts on S3) and above the SDK driver's own
    50 MiB payload cap, so checkpoints are not bounded by either."""
    data = os.urandom(64 * MiB)
    key = f"{prefix}big"
    await blob_store.put_object(bucket=blob_store.bucket, key=key, data=data)
    got = await blob_store.get_object(bucket=blob_store.bucket, key=key)
    assert len(got) == len(data)
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    assert await blob_store.delete_prefix(bucket=blob_store.bucket, prefix=prefix) == 1


async def test_location_and_close(blob_store: BlobStore) -> None:
    assert blob_store.bucket in blob_store.location()
    await blob_store.aclose()
    await blob_store.aclose()  # idempotent: the fixture closes it again
