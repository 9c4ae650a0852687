"""On an S3-compatible store (SeaweedFS), what the converter offloads is ciphertext: the
object's bytes hold none of the value, and the converter with the key reads it back."""

from __future__ import annotations

import json

from temporalio.api.common.v1 import Payload

from codemode.storage.encryption import Keyring
from codemode.worker.converter import data_converter
from tests.activities.conftest import open_s3_store

from .conftest import K1


async def test_offloaded_payloads_are_encrypted_in_s3(s3_server) -> None:
    store = await open_s3_store(s3_server)
    try:
        converter = data_converter(store, keys=Keyring.parse(K1))
        value = {"rows": [f"customer-{i}@example.com" for i in range(20_000)]}
        (reference,) = await converter.encode([value])
        claim = json.loads(reference.data)["claimData"]
        stored = await store.get_object(bucket=store.bucket, key=claim["key"])
        assert b"@example.com" not in stored and b"customer-" not in stored
        payload = Payload.FromString(stored)
        assert payload.metadata["encoding"] == b"binary/encrypted" and payload.metadata["encryption-key-id"] == b"k1"
        assert await converter.decode([reference]) == [value]
    finally:
        await store.aclose()
