"""The object store that keeps large state off the workflow history.

Two kinds of objects live there, both keyed under the execution that stored them:

* Temporal's claim-checked payloads: the SDK's ``ExternalStorage`` puts any payload at or
  above a size threshold (tool arguments and results, inputs, outputs, continue-as-new
  state) in the store and writes only a reference into the history. The driver is the
  SDK's own ``S3StorageDriver``, keys ``v0/ns/{ns}/wt/{type}/wi/{id}/ri/{run}/d/sha256/{hex}``.
* Checkpoints (Monty snapshots, session blobs): written by the sandbox steps themselves
  (``activities/checkpoints.py``), keys ``codemode/ns/{ns}/wi/{id}/ri/{first run}/cp/{sha256}``.

A ``BlobStore`` is the SDK's ``S3StorageDriverClient`` (so the SDK driver runs unchanged on
any store) plus the deletes and listing that retention needs. ``FileBlobStore`` is the
embedded default: a directory under the codemode data dir, good for one machine. An
S3-compatible service (``S3BlobStore``) is what workers on several machines share.

``StorageSettings.from_env()`` + ``open_blob_store()`` pick one: S3 when
``CODEMODE_S3_BUCKET`` is set, else files under ``<data dir>/blobs``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import itertools
import os
import shutil
import string
import tempfile
import uuid
from abc import abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, field_validator
from temporalio.contrib.aws.s3driver import S3StorageDriverClient

from codemode.runtimes.paths import data_dir

if TYPE_CHECKING:  # aioboto3/botocore are imported only when an S3 store is opened
    import aioboto3
    from aiobotocore.config import AioConfig
    from types_aiobotocore_s3.client import S3Client

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
BUCKET_ENV = "CODEMODE_S3_BUCKET"
ENDPOINT_ENV = "CODEMODE_S3_ENDPOINT_URL"
ADDRESSING_STYLE_ENV = "CODEMODE_S3_ADDRESSING_STYLE"
CREATE_BUCKET_ENV = "CODEMODE_S3_CREATE_BUCKET"
#: Region when neither the environment nor the AWS profile names one.
DEFAULT_REGION = "us-east-1"

_MISSING_KEY = frozenset({"NoSuchKey", "404", "NotFound"})
_MISSING_BUCKET = frozenset({"NoSuchBucket"})
_DENIED = frozenset(
    {"AccessDenied", "403", "Forbidden", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken"}
)


def is_aws_endpoint(endpoint_url: str | None) -> bool:
    """Whether the endpoint is Amazon's own (no endpoint means AWS's default)."""
    if not endpoint_url:
        return True
    host = (urlsplit(endpoint_url).hostname or "").lower()
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def s3_client_config(addressing_style: str | None = None) -> AioConfig:
    """The botocore settings every S3 client of ours uses."""
    from aiobotocore.config import AioConfig

    s3: Any = {"addressing_style": addressing_style} if addressing_style else None
    return AioConfig(
        # boto >= 1.36 adds a CRC32 checksum to every upload (for streamed bodies as an
        # aws-chunked body with a trailer) and asks for one on every download. Several
        # S3-compatible stores reject the first or never send the second, so only checksum
        # where the operation demands it. The SDK driver verifies its own sha256 on read.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
        # Virtual-hosted buckets (bucket.host) need wildcard DNS that a store at
        # http://10.0.0.5:8333 does not have; AWS itself keeps its default.
        s3=s3,
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=10,
        read_timeout=120,
    )


def _add_content_md5(request: Any, **_: Any) -> None:
    """DeleteObjects must carry an integrity header. boto >= 1.36 sends only a CRC32 one,
    which AWS accepts but some S3-compatible stores refuse (``MissingContentMD5``), so
    send the MD5 as well."""
    body = request.body
    if isinstance(body, str):
        body = body.encode()
    if isinstance(body, (bytes, bytearray)) and "Content-MD5" not in request.headers:
        digest = hashlib.md5(body, usedforsecurity=False).digest()
        request.headers["Content-MD5"] = base64.b64encode(digest).decode("ascii")


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3BlobStore(BlobStore):
    """Any S3-compatible service (AWS S3, SeaweedFS, MinIO, Ceph, R2, ...) through one
    aioboto3 client. Open it with ``await S3BlobStore.open(...)``; it keeps the client for
    the life of the process (the SDK driver uploads from the worker's event loop at any
    time) and ``aclose()`` releases it. Like any aiohttp client it belongs to the event
    loop that opened it: open it in the loop that runs the worker. put/get/exists are the
    SDK's own aioboto3 adapter (multipart uploads above 8 MiB); errors come back as
    ``BlobNotFound`` for a missing key and ``BlobStoreError`` naming the endpoint and
    bucket for a store we cannot use."""

    #: S3's limit on keys per DeleteObjects request and per listing page.
    delete_batch_size = 1000
    list_page_size = 1000

    def __init__(
        self,
        client: S3Client,
        bucket: str,
        *,
        exit_stack: contextlib.AsyncExitStack | None = None,
    ) -> None:
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        super().__init__(bucket)
        self._client = client
        self._sdk = new_aioboto3_client(client)
        self._exit_stack = exit_stack

    @classmethod
    async def open(
        cls,
        bucket: str,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        addressing_style: Literal["auto", "path", "virtual"] | None = None,
        create_bucket: bool = False,
        session: aioboto3.Session | None = None,
    ) -> S3BlobStore:
        """Connect and check the bucket (creating it when ``create_bucket``), so a wrong
        endpoint, bucket or credential fails at startup and not at the first offload.

        ``session`` defaults to ``aioboto3.Session()``: credentials from the AWS SDK's
        chain. ``region`` defaults to the session's (``AWS_DEFAULT_REGION`` or the profile),
        then ``us-east-1``. Addressing is path-style for any endpoint that is not AWS."""
        try:
            import aioboto3
        except ImportError as exc:
            raise BlobStoreError(
                "an S3 object store needs the S3 client: pip install 'durable-codemode[s3]' "
                "(or pip install 'temporalio[aioboto3]')"
            ) from exc

        session = session or aioboto3.Session()
        region = region or session.region_name or DEFAULT_REGION
        if addressing_style is None and not is_aws_endpoint(endpoint_url):
            addressing_style = "path"
        stack = contextlib.AsyncExitStack()
        try:
            client = await stack.enter_async_context(
                session.client(
                    "s3", endpoint_url=endpoint_url, region_name=region, config=s3_client_config(addressing_style)
                )
            )
            client.meta.events.register("before-sign.s3.DeleteObjects", _add_content_md5)
            store = cls(client, bucket, exit_stack=stack)
            await store.ensure_bucket(create=create_bucket)
        except BaseException:
            await stack.aclose()
            raise
        return store

    @property
    def client(self) -> S3Client:
        """The aioboto3 client, for what this interface does not cover (lifecycle rules)."""
        return self._client

    @property
    def endpoint_url(self) -> str:
        """The endpoint botocore resolved (AWS's regional one when none was given)."""
        return str(self._client.meta.endpoint_url)

    @property
    def region(self) -> str | None:
        return self._client.meta.region_name

    def location(self) -> str:
        return f"s3://{self.bucket} at {self.endpoint_url}"

    def describe(self) -> Mapping[str, str]:
        return {"endpoint": self.endpoint_url, "region": self.region or "?"}

    async def ensure_bucket(self, *, create: bool = False) -> None:
        """Check that the bucket exists and we may use it; create it when asked."""
        try:
            with self._errors(self.bucket):
                await self._client.head_bucket(Bucket=self.bucket)
            return
        except BucketNotFound:
            if not create:
                raise BucketNotFound(
                    f"the bucket {self.bucket!r} does not exist at {self.endpoint_url}; create it "
                    f"or set {CREATE_BUCKET_ENV}=1"
                ) from None
        from botocore.exceptions import ClientError

        kwargs: dict[str, Any] = {}
        if self.region and self.region != DEFAULT_REGION and is_aws_endpoint(self.endpoint_url):
            kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
        with self._errors(self.bucket):
            try:
                await self._client.create_bucket(Bucket=self.bucket, **kwargs)
            except ClientError as e:
                # Another worker created it first: fine as long as we may use it.
                if _error_code(e) not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise
                await self._client.head_bucket(Bucket=self.bucket)

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        with self._errors(bucket, key):
            await self._sdk.put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        with self._errors(bucket, key):
            return await self._sdk.object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        with self._errors(bucket, key):
            return await self._sdk.get_object(bucket=bucket, key=key)

    async def delete_objects(self, *, bucket: str, keys: Sequence[str]) -> None:
        for i in range(0, len(keys), self.delete_batch_size):
            batch = keys[i : i + self.delete_batch_size]
            with self._errors(bucket):
                response = await self._client.delete_objects(
                    Bucket=bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            # A 200 can still carry per-key failures; a key already gone is not one.
            failed = [e for e in response.get("Errors", []) if e.get("Code") != "NoSuchKey"]
            if failed:
                first = failed[0]
                raise BlobStoreError(
                    f"could not delete {len(failed)} of {len(batch)} objects in s3://{bucket} at "
                    f"{self.endpoint_url}; first {first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}"
                )

    async def list_keys(self, *, bucket: str, prefix: str) -> list[str]:
        keys: list[str] = []
        paginator = self._client.get_paginator("list_objects_v2")
        with self._errors(bucket):
            async for page in paginator.paginate(
                Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": self.list_page_size}
            ):
                keys.extend(obj["Key"] for obj in page.get("Contents", []))
        return keys

    async def aclose(self) -> None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            await stack.aclose()

    @contextlib.contextmanager
    def _errors(self, bucket: str, key: str | None = None) -> Iterator[None]:
        """botocore's exceptions as ours, each naming the endpoint and bucket."""
        from botocore.exceptions import (
            BotoCoreError,
            ClientError,
            ConnectionError,
            NoCredentialsError,
            PartialCredentialsError,
        )

        where = f"s3://{bucket} at {self.endpoint_url}"
        try:
            yield
        except ClientError as e:
            code = _error_code(e)
            if key is not None and code in _MISSING_KEY:
                raise BlobNotFound(f"no object {key!r} in {where}") from e
            if code in _MISSING_BUCKET or (key is None and code in _MISSING_KEY):
                raise BucketNotFound(f"the bucket {bucket!r} does not exist at {self.endpoint_url}") from e
            if code in _DENIED:
                raise BlobStoreError(
                    f"access to {where} denied ({code}); check the AWS credentials (AWS_ACCESS_KEY_ID/"
                    f"AWS_SECRET_ACCESS_KEY or AWS_PROFILE) and their permissions"
                ) from e
            raise
        except (NoCredentialsError, PartialCredentialsError) as e:
            raise BlobStoreError(
                f"no AWS credentials for {where}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE ({e})"
            ) from e
        except ConnectionError as e:
            raise BlobStoreError(f"cannot reach the S3 endpoint {self.endpoint_url} (bucket {bucket!r}): {e}") from e
        except BotoCoreError:
            raise


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
