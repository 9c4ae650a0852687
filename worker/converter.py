"""The one data converter every client, worker, replayer and test environment uses.

pydantic JSON for our models, then Temporal's own claim check: any payload at or above
``PAYLOAD_THRESHOLD`` bytes (a tool's 40,000 rows, a large input, the state a long run
carries into its next run) goes to the object store through the SDK's ``S3StorageDriver``
and the history holds a reference with its SHA-256. The same ``BlobStore`` keeps the
checkpoints (``activities/checkpoints.py``). Where the store is: ``activities/storage.py``.

With ``CODEMODE_ENCRYPTION_KEYS`` set, an AES-256-GCM payload codec sits between the two
(``activities/encryption.py``): every payload is encrypted before the claim check decides
where it goes, so the object store holds ciphertext too, and failures carry their message and
stack trace as an encoded (so encrypted) attribute instead of in the clear. What stays
readable: key ids, external-storage references (driver name, key, SHA-256 of the ciphertext),
search attributes, and the names of activities and signals.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import ClassVar, Literal

from temporalio.api.failure.v1 import Failure
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.pydantic import PydanticPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    EncodingPayloadConverter,
    ExternalStorage,
    FailureConverter,
    PayloadConverter,
)

from codemode.activities.encryption import DecryptionFailed, EncryptionCodec, Keyring, UnknownEncryptionKey
from codemode.activities.storage import BlobStore, StorageSettings, open_blob_store

#: Payloads this large or larger are stored outside the history (the SDK's default).
PAYLOAD_THRESHOLD = int(os.environ.get("CODEMODE_PAYLOAD_THRESHOLD") or 256 * 1024)
#: The driver's own ceiling. Our values are capped far lower (codemode.activities.models
#: MAX_VALUE_BYTES); this only has to let state made of many of them through.
MAX_STORED_PAYLOAD = 4 * 1024 * 1024 * 1024


class StoreDriver(S3StorageDriver):
    """The SDK's S3 driver on one of our stores (any ``BlobStore``), keeping the store at hand
    so workers and the CLI reach the same store the converter writes to."""

    def __init__(self, store: BlobStore) -> None:
        super().__init__(
            client=store, bucket=store.bucket, driver_name=store.driver_name, max_payload_size=MAX_STORED_PAYLOAD
        )
        self.blob_store = store


class SharedPydanticPayloadConverter(PydanticPayloadConverter):
    """The SDK's pydantic payload converter, built once per process.

    The SDK derives a new ``DataConverter`` for every activation, every activity and, while it
    visits an activation's payloads, for every payload (``_with_store_context`` runs
    ``__post_init__`` again), and each one builds a new payload converter with an empty
    ``TypeAdapter`` cache. Its encoding converters keep no state but that cache (which is safe
    to share: pydantic's adapters are immutable), so every instance shares one set (issue 11:
    about 5-10% of a worker's CPU per tool call)."""

    _shared: ClassVar[Mapping[bytes, EncodingPayloadConverter] | None] = None

    def __init__(self) -> None:
        shared = SharedPydanticPayloadConverter._shared
        if shared is None:
            super().__init__()
            SharedPydanticPayloadConverter._shared = self.converters
        else:
            self.converters = shared


class EncryptedFailureConverter(DefaultFailureConverterWithEncodedAttributes):
    """Failure messages and stack traces go into the encoded (encrypted) attributes, except the
    codec's own errors (a key not held, ciphertext that does not authenticate): they name only
    key ids, and whoever reads the failed workflow task in the history or the UI may be the
    person who has to fix the keys, without being able to decrypt anything yet."""

    def to_failure(self, exception: BaseException, payload_converter: PayloadConverter, failure: Failure) -> None:
        if isinstance(exception, (UnknownEncryptionKey, DecryptionFailed)):
            FailureConverter.default.to_failure(exception, payload_converter, failure)
            return
        super().to_failure(exception, payload_converter, failure)


def data_converter(
    store: BlobStore,
    *,
    threshold: int = PAYLOAD_THRESHOLD,
    keys: Keyring | Literal["env"] | None = "env",
) -> DataConverter:
    """pydantic JSON with large payloads claim-checked into ``store``, encrypted under ``keys``
    (by default the keyring ``CODEMODE_ENCRYPTION_KEYS`` configures; None: no encryption)."""
    keyring = Keyring.from_env() if keys == "env" else keys
    converter = dataclasses.replace(
        pydantic_data_converter,
        payload_converter_class=SharedPydanticPayloadConverter,
        external_storage=ExternalStorage(drivers=[StoreDriver(store)], payload_size_threshold=threshold),
    )
    if keyring is None:
        return converter
    return dataclasses.replace(
        converter, payload_codec=EncryptionCodec(keyring), failure_converter_class=EncryptedFailureConverter
    )


def keyring_of(converter: DataConverter) -> Keyring | None:
    """The keyring of a converter made by ``data_converter`` (None when it does not encrypt)."""
    codec = converter.payload_codec
    return codec.keyring if isinstance(codec, EncryptionCodec) else None


def store_of(converter: DataConverter) -> BlobStore | None:
    """The object store behind a converter made by ``data_converter`` (None for any other)."""
    storage = converter.external_storage
    if storage is None:
        return None
    for driver in storage.drivers:
        if isinstance(driver, StoreDriver):
            return driver.blob_store
    return None


_process_store: BlobStore | None = None


async def default_store() -> BlobStore:
    """This process's store, configured from the environment (opened once, kept open)."""
    global _process_store
    if _process_store is None:
        _process_store = await open_store_from_env()
    return _process_store


async def open_store_from_env() -> BlobStore:
    """S3 when ``CODEMODE_S3_BUCKET`` is set, else files under ``<data dir>/blobs``."""
    return await open_blob_store(StorageSettings.from_env())
