"""Where bytes are kept: ``BlobStore`` (the SDK's ``S3StorageDriverClient`` plus the deletes
and listing retention needs), its errors, and ``FileBlobStore``, the embedded default (a
directory under the codemode data dir)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
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


class BlobStoreError(RuntimeError):
    """The store itself cannot be used: unreachable, bucket missing, access denied, no
    credentials. The message names the endpoint and the bucket."""


class BucketNotFound(BlobStoreError):
    """The configured bucket does not exist."""


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
        return


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
        if len(data) <= INLINE_WRITE_BYTES:  # a checkpoint of a few KB: cheaper than a thread hop
            _write_atomic(path, data)
        else:
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
        if len(paths) <= 4:  # a step's superseded checkpoint: one unlink, no thread hop
            _unlink_all(paths)
        else:
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


#: Objects up to this size are written on the event loop (page cache, tens of microseconds).
INLINE_WRITE_BYTES = 64 * 1024
_TMP_PREFIX = f".{uuid.uuid4().hex[:8]}-"
_TMP_SEQ = itertools.count()


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = str(path.parent / f"{_TMP_PREFIX}{next(_TMP_SEQ)}.part")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileNotFoundError:  # the first object under this prefix
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:  # a leftover of an earlier process with the same prefix
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX, suffix=".part")
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


# --- S3-compatible services -------------------------------------------------------------

#: Environment variables read by ``StorageSettings.from_env`` (credentials are not among
#: them on purpose: they come from the AWS SDK's own chain).
