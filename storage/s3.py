"""``S3BlobStore``: any S3-compatible service, what workers on several machines share."""

from __future__ import annotations

import base64
import contextlib
import hashlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from codemode.storage.blobs import BlobNotFound, BlobStore, BlobStoreError, BucketNotFound

if TYPE_CHECKING:  # aioboto3/botocore are imported only when an S3 store is opened
    import aioboto3
    from aiobotocore.config import AioConfig
    from types_aiobotocore_s3.client import S3Client

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


