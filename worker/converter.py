"""The one data converter every client, worker, replayer and test environment uses.

pydantic JSON for our models, then Temporal's own claim check: any payload at or above
``PAYLOAD_THRESHOLD`` bytes (a tool's 40,000 rows, a large input, the state a long run
carries into its next run) goes to the object store through the SDK's ``S3StorageDriver``
and the history holds a reference with its SHA-256. The same ``BlobStore`` keeps the
checkpoints (``activities/checkpoints.py``). Where the store is: ``storage/__init__.py``.

With ``CODEMODE_ENCRYPTION_KEYS`` set, an AES-256-GCM payload codec sits between the two
(``storage/encryption.py``): every payload is encrypted before the claim check decides
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

from pydantic_core import to_json
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.aws.s3driver import S3StorageDriver
from temporalio.contrib.pydantic import (
    PydanticJSONPlainPayloadConverter,
    PydanticPayloadConverter,
    pydantic_data_converter,
)
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    EncodingPayloadConverter,
    ExternalStorage,
    FailureConverter,
    PayloadConverter,
)

from codemode.runtimes.types import HISTORY_CONTEXT
from codemode.storage import BlobStore, StorageSettings, open_blob_store
from codemode.storage.encryption import DecryptionFailed, EncryptionCodec, Keyring, UnknownEncryptionKey

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


class HistoryJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """The SDK's pydantic JSON converter, serializing under ``HISTORY_CONTEXT``: what it writes
    goes into histories, so ``CompactModel``s leave their defaults out here (and only here:
    the JSON people and programs read keeps every field)."""

    def to_payload(self, value: object) -> Payload | None:
        return Payload(metadata={"encoding": self.encoding.encode()}, data=to_json(value, context=HISTORY_CONTEXT))


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
            history_json = HistoryJSONPayloadConverter()
            self.converters = {
                encoding: history_json if isinstance(c, PydanticJSONPlainPayloadConverter) else c
                for encoding, c in self.converters.items()
            }
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


class CannotCompose(ValueError):
    """Code mode and another plugin (or the application) both need the same part of the data
    converter; the message says which and why, in one line."""


#: Payload converters that encode as ours does: replaced by ours (which shares its adapters).
_PYDANTIC_JSON = (DefaultPayloadConverter, PydanticPayloadConverter, SharedPydanticPayloadConverter)
#: Failure converters ours may replace when it encrypts (they only differ in what is encoded).
_PLAIN_FAILURES = (DefaultFailureConverter, DefaultFailureConverterWithEncodedAttributes, EncryptedFailureConverter)


def composed_data_converter(
    existing: DataConverter | None,
    store: BlobStore,
    *,
    keys: Keyring | None,
    yield_payload_converter: bool = False,
) -> DataConverter:
    """Our converter on top of ``existing`` (what the application or an earlier plugin set):
    a payload converter of another plugin (OpenAI Agents', Deep Agents', ADK's...) is kept, and
    our object store (external storage) and codec go around it.

    ``yield_payload_converter``: a plugin after ours installs its own payload converter and
    accepts only the SDK's default class there (OpenAI Agents, Deep Agents): leave that class,
    it replaces it and keeps our store and codec. Raises ``CannotCompose`` where both want the
    same part (another external storage; another failure converter while we encrypt)."""
    ours = data_converter(store, keys=keys)
    if yield_payload_converter:
        ours = dataclasses.replace(ours, payload_converter_class=DefaultPayloadConverter)
    if existing is None:
        return ours
    if existing.external_storage is not None and store_of(existing) is None:
        drivers = ", ".join(type(d).__name__ for d in existing.external_storage.drivers)
        raise CannotCompose(
            f"CodeModePlugin cannot compose: the data converter already stores large payloads externally "
            f"({drivers}); code mode's object store must be the external storage (pass it as CodeModePlugin(store=...))"
        )
    converter = ours
    if existing.payload_converter_class not in _PYDANTIC_JSON:
        converter = dataclasses.replace(converter, payload_converter_class=existing.payload_converter_class)
    failure = existing.failure_converter_class
    if failure not in _PLAIN_FAILURES:
        if keys is not None:
            raise CannotCompose(
                f"CodeModePlugin cannot compose: encryption needs its own failure converter (messages and stack "
                f"traces encrypted), but the data converter has {failure.__name__} from another plugin; run "
                f"without CODEMODE_ENCRYPTION_KEYS or without that plugin's failure converter"
            )
        converter = dataclasses.replace(converter, failure_converter_class=failure)
    if keys is None and existing.payload_codec is not None:
        # Keep a codec of the application's own when we do not encrypt.
        converter = dataclasses.replace(converter, payload_codec=existing.payload_codec)
    return converter


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
