"""The keyring, the payload codec and checkpoint sealing on their own (real AES-GCM)."""

from __future__ import annotations

import base64

import pytest
from temporalio.api.common.v1 import Payload

from codemode.activities.checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable
from codemode.storage import FileBlobStore
from codemode.storage.encryption import (
    ENCODING,
    KEY_ID_METADATA,
    DecryptionFailed,
    EncryptionCodec,
    EncryptionKeyError,
    Keyring,
    UnknownEncryptionKey,
    new_key,
)

from .conftest import K1, K2


def test_parse_first_key_encrypts_all_decrypt() -> None:
    ring = Keyring.parse(f" {K2} , {K1} ")
    assert ring.active == "k2" and ring.key_ids == ["k2", "k1"]
    old = Keyring.parse(K1)
    key_id, blob = old.encrypt(b"secret", b"ad")
    assert key_id == "k1" and b"secret" not in blob
    assert ring.decrypt(key_id, blob, b"ad") == b"secret"
    assert Keyring.parse(f"k1:{base64.urlsafe_b64encode(bytes(range(32))).decode().rstrip('=')}").active == "k1"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("k1", "entry 1 is not KEY_ID:BASE64_32_BYTES"),
        (f"k1:{base64.b64encode(b'short').decode()}", "is 5 bytes; AES-256 needs 32"),
        ("k1:not base64!", "not valid base64"),
        (f"{K1},{K1}", "appears twice"),
        (f"bad id:{new_key()}", "must be 1 to 64 letters"),
        (" , ", "holds no key"),
    ],
    ids=["no-colon", "short", "not-base64", "twice", "bad-id", "empty"],  # (stable: one has a random key)
)
def test_malformed_keys_say_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(EncryptionKeyError, match=says):
        Keyring.parse(text)


def test_from_env_is_off_when_unset() -> None:
    assert Keyring.from_env({}) is None
    assert Keyring.from_env({"CODEMODE_ENCRYPTION_KEYS": "  "}) is None
    assert Keyring.from_env({"CODEMODE_ENCRYPTION_KEYS": K1}).active == "k1"  # type: ignore[union-attr]


async def test_codec_round_trip_rotation_and_unknown_key() -> None:
    original = Payload(metadata={"encoding": b"json/plain"}, data=b'{"card": "4242"}')
    (sealed,) = await EncryptionCodec(Keyring.parse(K1)).encode([original])
    assert sealed.metadata["encoding"] == ENCODING and sealed.metadata[KEY_ID_METADATA] == b"k1"
    assert b"4242" not in sealed.SerializeToString()
    assert await EncryptionCodec(Keyring.parse(f"{K2},{K1}")).decode([sealed]) == [original]
    with pytest.raises(UnknownEncryptionKey, match="key id 'k1', which is not in CODEMODE_ENCRYPTION_KEYS .*holds: k2"):
        await EncryptionCodec(Keyring.parse(K2)).decode([sealed])
    # A plaintext payload (written before keys were set) passes through.
    assert await EncryptionCodec(Keyring.parse(K2)).decode([original]) == [original]
    # Ciphertext moved under another key id's label, or altered, does not authenticate.
    forged = Payload()
    forged.CopyFrom(sealed)
    forged.data = sealed.data[:-1] + bytes([sealed.data[-1] ^ 1])
    with pytest.raises(DecryptionFailed, match="altered"):
        await EncryptionCodec(Keyring.parse(K1)).decode([forged])


async def test_sealed_checkpoints_refuse_what_a_key_holder_did_not_write(tmp_path) -> None:
    store = FileBlobStore(tmp_path)
    scope = CheckpointScope("default", "exec-a", "run-a")
    other = CheckpointScope("default", "exec-b", "run-b")
    sealed = CheckpointStore(store, keys=Keyring.parse(K1))
    ref = await sealed.save(scope, b"heap with a secret")
    blob = await store.get_object(bucket=store.bucket, key=scope.key(ref))
    assert blob.startswith(b"CMCK1\x02k1") and b"secret" not in blob
    assert await sealed.load(scope, ref) == b"heap with a secret"
    assert await CheckpointStore(store, keys=Keyring.parse(f"{K2},{K1}")).load(scope, ref) == b"heap with a secret"

    async def refused(store_: CheckpointStore, scope_: CheckpointScope, data: bytes) -> str:
        import hashlib

        from codemode.activities.models import CheckpointRef

        forged = CheckpointRef(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        await store.put_object(bucket=store.bucket, key=scope_.key(forged), data=data)
        with pytest.raises(CheckpointUnusable) as err:
            await store_.load(scope_, forged)
        return str(err.value)

    # Even with a matching hash (a forged reference), only what the key sealed for this execution loads.
    assert "not sealed" in await refused(sealed, scope, b"an unsealed snapshot")
    assert "does not authenticate under key 'k1'" in await refused(sealed, other, blob)
    assert "does not authenticate" in await refused(sealed, scope, blob[:-1] + bytes([blob[-1] ^ 1]))
    assert "key id 'k1', which is not in" in await refused(CheckpointStore(store, keys=Keyring.parse(K2)), scope, blob)
    assert "this worker has no encryption keys" in await refused(CheckpointStore(store), scope, blob)
    # A sealed checkpoint does not pass for a stored segment of state, nor the other way round.
    seg = await sealed.save(scope, b"journal", kind="seg")
    seg_blob = await store.get_object(bucket=store.bucket, key=scope.key(seg, "seg"))
    assert "does not authenticate" in await refused(sealed, scope, seg_blob)
    assert await sealed.load(scope, seg, kind="seg") == b"journal"
    # Without keys, checkpoints stay as they were (no header).
    plain = CheckpointStore(store)
    assert await plain.load(scope, await plain.save(scope, b"plain")) == b"plain"


def test_failures_are_encoded_except_the_codecs_own_errors(tmp_path) -> None:
    from temporalio.api.failure.v1 import Failure

    from codemode.worker.converter import data_converter

    converter = data_converter(FileBlobStore(tmp_path), keys=Keyring.parse(K1))
    secret = Failure()
    converter.failure_converter.to_failure(ValueError("card 4242 declined"), converter.payload_converter, secret)
    assert secret.message == "Encoded failure" and "4242" not in secret.stack_trace
    assert b"4242" in secret.encoded_attributes.data  # encrypted when the worker encodes its completion
    missing = Failure()
    error = UnknownEncryptionKey("k1", ["k2"])
    converter.failure_converter.to_failure(error, converter.payload_converter, missing)
    assert missing.message == str(error) and not missing.HasField("encoded_attributes")
