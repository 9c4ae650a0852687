"""Choosing the store from the environment: ``StorageSettings.from_env()``, ``open_blob_store``
and ``blob_store_for`` (an S3 store opened on first use, ``LazyBlobStore``)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator

from codemode.runtimes.paths import data_dir
from codemode.storage.blobs import DEFAULT_BUCKET, BlobStore, FileBlobStore
from codemode.storage.s3 import ADDRESSING_STYLE_ENV, BUCKET_ENV, CREATE_BUCKET_ENV, ENDPOINT_ENV, S3BlobStore

# --- choosing a store from the environment ------------------------------------------------


class StorageSettings(BaseModel):
    """Which object store to use. S3 when ``bucket`` is set, else files under ``file_root``
    (default ``<codemode data dir>/blobs``).

    There are no credential fields on purpose: an S3 store takes them from the AWS SDK's
    own chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``,
    ``AWS_PROFILE`` and ``~/.aws``, container and instance roles)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bucket: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    addressing_style: Literal["auto", "path", "virtual"] | None = None
    #: Create the bucket when it is missing (tests, a local compose stack); off in
    #: production, where a missing bucket is a configuration error to report.
    create_bucket: bool = False
    file_root: Path | None = None

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"S3 endpoint {value!r} is not an http(s) URL, e.g. http://127.0.0.1:8333")
        return value

    @property
    def kind(self) -> Literal["s3", "file"]:
        return "s3" if self.bucket else "file"

    @classmethod
    def from_env(cls) -> StorageSettings:
        """Read the environment; empty variables count as unset.

        * bucket: ``CODEMODE_S3_BUCKET`` (unset: the file store)
        * endpoint: ``CODEMODE_S3_ENDPOINT_URL``, then the AWS SDK's ``AWS_ENDPOINT_URL_S3``,
          then ``AWS_ENDPOINT_URL`` (unset: AWS)
        * region: ``AWS_REGION``, then ``AWS_DEFAULT_REGION``, then the AWS profile's, then
          ``us-east-1``
        * ``CODEMODE_S3_ADDRESSING_STYLE`` (auto/path/virtual; default path off AWS),
          ``CODEMODE_S3_CREATE_BUCKET`` (1/true to create a missing bucket)
        * file store root: ``<data dir>/blobs`` (``CODEMODE_DATA_DIR`` or the user data dir)
        """

        def first(*names: str) -> str | None:
            for name in names:
                value = os.environ.get(name, "").strip()
                if value:
                    return value
            return None

        bucket = first(BUCKET_ENV)
        settings: dict[str, Any] = {
            "bucket": bucket,
            "endpoint_url": first(ENDPOINT_ENV, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
            "region": first("AWS_REGION", "AWS_DEFAULT_REGION"),
            "addressing_style": first(ADDRESSING_STYLE_ENV),
            "create_bucket": first(CREATE_BUCKET_ENV) or False,
            "file_root": None if bucket else default_file_root(),
        }
        return cls.model_validate(settings)


def default_file_root() -> Path:
    """``<codemode data dir>/blobs``, next to the embedded server's SQLite file."""
    return data_dir() / "blobs"


async def open_blob_store(settings: StorageSettings | None = None) -> BlobStore:
    """The store the settings (default: the environment) name, opened and checked."""
    settings = settings if settings is not None else StorageSettings.from_env()
    if settings.bucket:
        return await S3BlobStore.open(
            settings.bucket,
            endpoint_url=settings.endpoint_url,
            region=settings.region,
            addressing_style=settings.addressing_style,
            create_bucket=settings.create_bucket,
        )
    return FileBlobStore(settings.file_root or default_file_root())


class LazyBlobStore(BlobStore):
    """A store opened on first use, in the event loop that first uses it.

    A Temporal plugin configures a client's data converter synchronously, before any event
    loop runs the worker, while an S3 store's client belongs to the loop that opens it: this
    defers ``open_blob_store(settings)`` to the first put/get/list, under a lock, and then
    delegates. A store that cannot be opened fails that first operation with the same
    ``BlobStoreError`` an eager open gives, and the next operation tries again."""

    def __init__(self, settings: StorageSettings) -> None:
        super().__init__(settings.bucket or DEFAULT_BUCKET)
        self.settings = settings
        self._opened: BlobStore | None = None
        self._lock: asyncio.Lock | None = None

    async def opened(self) -> BlobStore:
        if self._opened is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._opened is None:
                    self._opened = await open_blob_store(self.settings)
        return self._opened

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self.opened()).put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return await (await self.opened()).object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        return await (await self.opened()).get_object(bucket=bucket, key=key)

    async def delete_objects(self, *, bucket: str, keys: Sequence[str]) -> None:
        await (await self.opened()).delete_objects(bucket=bucket, keys=keys)

    async def list_keys(self, *, bucket: str, prefix: str) -> list[str]:
        return await (await self.opened()).list_keys(bucket=bucket, prefix=prefix)

    def location(self) -> str:
        if self._opened is not None:
            return self._opened.location()
        if self.settings.bucket:
            where = f" at {self.settings.endpoint_url}" if self.settings.endpoint_url else ""
            return f"s3://{self.settings.bucket}{where}"
        return FileBlobStore(self.settings.file_root or default_file_root()).location()

    async def aclose(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.aclose()


def blob_store_for(settings: StorageSettings | None = None) -> BlobStore:
    """The store the settings (default: the environment) name, without awaiting anything: the
    file store as is, an S3 store opened on first use (``LazyBlobStore``)."""
    settings = settings if settings is not None else StorageSettings.from_env()
    if settings.bucket:
        return LazyBlobStore(settings)
    return FileBlobStore(settings.file_root or default_file_root())
