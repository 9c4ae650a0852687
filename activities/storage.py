"""The object store that keeps large state off the workflow history.

Two kinds of objects live there, both keyed under the execution that stored them:

* Temporal's claim-checked payloads: the SDK's ``ExternalStorage`` puts any payload at or
  above a size threshold (tool arguments and results, inputs, outputs, continue-as-new
  state) in the store and writes only a reference into the history. The driver is the
  SDK's own ``S3StorageDriver``, keys ``v0/ns/{ns}/wt/{type}/wi/{id}/ri/{run}/d/sha256/{hex}``.
* Checkpoints (Monty snapshots, session blobs): written by the sandbox steps themselves
  (``activities/checkpoints.py``), keys ``codemode/ns/{ns}/wi/{id}/cp/{sha256}``.

A ``BlobStore`` is the SDK's ``S3StorageDriverClient`` (so the SDK driver runs unchanged on
any store) plus the deletes and listing that retention needs. ``FileBlobStore`` is the
embedded default: a directory under the codemode data dir, good for one machine. An
S3-compatible service (``S3BlobStore``) is what workers on several machines share.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import string
import tempfile
import uuid
from abc import abstractmethod
from collections.abc import Sequence
from pathlib import Path

from temporalio.contrib.aws.s3driver import S3StorageDriverClient

#: Bucket used when none is configured (a directory under the data dir for the file store).
DEFAULT_BUCKET = "codemode"

_SAFE = frozenset(string.ascii_letters + string.digits + "!-_.*'()")


def key_segment(value: str | None) -> str:
    """A value as one key segment, percent-encoded exactly as the SDK's S3 driver does, so
    our prefixes line up with the keys it writes (``null`` for an empty value)."""
    if not value:
        return "null"
    return "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in value.encode())


class BlobNotFound(LookupError):
    """No object at that key (never stored, or deleted)."""


class BlobStore(S3StorageDriverClient):
    """An object store: put/get/exists (the SDK driver's client interface), delete, list."""

    #: The driver name ExternalStorage records in every reference it writes: payloads stored
    #: through one kind of store can only be read back through the same kind.
    driver_name: str = "aws.s3driver"

    def __init__(self, bucket: str = DEFAULT_BUCKET) -> None:
        self.bucket = bucket

    @abstractmethod
    async def delete_objects(self, *, bucket: str, keys: Sequence[str]) -> None:
        """Delete these keys; keys that do not exist are ignored."""

    @abstractmethod
    async def list_keys(self, *, bucket: str, prefix: str) -> list[str]:
        """Every key that starts with ``prefix``."""

    async def delete_prefix(self, *, bucket: str, prefix: str) -> int:
        """Delete every key under ``prefix``; returns how many were deleted."""
        keys = await self.list_keys(bucket=bucket, prefix=prefix)
        for i in range(0, len(keys), 1000):
            await self.delete_objects(bucket=bucket, keys=keys[i : i + 1000])
        return len(keys)

    @abstractmethod
    def location(self) -> str:
        """Where the objects are, for messages (``file:///...`` or ``s3://bucket``)."""

    async def aclose(self) -> None:
        """Release connections."""
        return None


class FileBlobStore(BlobStore):
    """Objects as files under ``root/bucket/``: writes are atomic (temp file + rename), so a
    crash never leaves a half-written object behind a valid key."""

    driver_name = "codemode.file"

    def __init__(self, root: str | Path, bucket: str = DEFAULT_BUCKET) -> None:
        super().__init__(bucket)
        self.root = Path(root)

    def _path(self, bucket: str, key: str) -> Path:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts) or "\\" in key or "\0" in key:
            raise ValueError(f"bad object key {key!r}")
        if not bucket or "/" in bucket or bucket in (".", ".."):
            raise ValueError(f"bad bucket name {bucket!r}")
        return self.root.joinpath(bucket, *parts)

    def location(self) -> str:
        return (self.root / self.bucket).resolve().as_uri()

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        path = self._path(bucket, key)
        await asyncio.to_thread(_write_atomic, path, data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return self._path(bucket, key).is_file()

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        path = self._path(bucket, key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            raise BlobNotFound(f"no object {key!r} in {self.location()}") from None

    async def delete_objects(self, *, bucket: str, keys: Sequence[str]) -> None:
        paths = [self._path(bucket, k) for k in keys]
        await asyncio.to_thread(_unlink_all, paths)

    async def list_keys(self, *, bucket: str, prefix: str) -> list[str]:
        base = self.root / bucket
        return await asyncio.to_thread(_list, base, prefix)

    async def delete_prefix(self, *, bucket: str, prefix: str) -> int:
        keys = await self.list_keys(bucket=bucket, prefix=prefix)
        await self.delete_objects(bucket=bucket, keys=keys)
        if prefix.endswith("/"):  # drop the emptied directories too
            directory = self._path(bucket, prefix.rstrip("/"))
            await asyncio.to_thread(shutil.rmtree, directory, True)
        return len(keys)


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{uuid.uuid4().hex[:8]}-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _unlink_all(paths: Sequence[Path]) -> None:
    for p in paths:
        with contextlib.suppress(OSError):
            p.unlink()


def _list(base: Path, prefix: str) -> list[str]:
    # Walk only the deepest directory the prefix names, not the whole bucket.
    head, _, _ = prefix.rpartition("/")
    start = base.joinpath(*head.split("/")) if head else base
    if not start.is_dir():
        return []
    keys: list[str] = []
    for dirpath, _dirs, files in os.walk(start):
        rel = Path(dirpath).relative_to(base).as_posix()
        for name in files:
            if name.endswith(".part"):
                continue
            key = name if rel == "." else f"{rel}/{name}"
            if key.startswith(prefix):
                keys.append(key)
    return sorted(keys)

