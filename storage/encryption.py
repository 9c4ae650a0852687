"""Encryption at rest: AES-256-GCM under a keyring from ``CODEMODE_ENCRYPTION_KEYS``.

``CODEMODE_ENCRYPTION_KEYS=KEY_ID:BASE64_32_BYTES[,KEY_ID:BASE64_32_BYTES...]``: the first key
encrypts, every key decrypts, so a key is rotated by putting a new one first and keeping the
old ones for as long as anything written under them can still be read. Two users of one keyring:

- ``EncryptionCodec``, the payload codec of our data converter (``worker/converter.py``): every
  payload Temporal stores (inputs, results, signals, queries, summaries, failures' encoded
  attributes, and the blobs external storage offloads) becomes ``binary/encrypted`` with the
  key id in its metadata;
- ``CheckpointStore`` (``activities/checkpoints.py``) seals each checkpoint with the execution
  it belongs to as associated data, so only a key holder can have written what a sandbox loads.

A nonce is 96 random bits per message (NIST SP 800-38D): rotate a key well before 2**32
encryptions under it.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import secrets
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

KEYS_ENV = "CODEMODE_ENCRYPTION_KEYS"
#: The metadata of an encrypted payload (the names Temporal's samples use).
ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: Associated data of a payload: a payload's ciphertext cannot pass for anything else's.
_PAYLOAD_AD = b"codemode/payload/v1:"


class EncryptionKeyError(ValueError):
    """``CODEMODE_ENCRYPTION_KEYS`` is malformed; the message says which entry and why."""


class UnknownEncryptionKey(Exception):
    """Data was encrypted under a key id this process does not hold.

    Deliberately not a non-retryable ``ApplicationError``: raised while a worker decodes a
    workflow task, it fails that task (retried), never the run, so adding the key back to the
    workers lets the run carry on."""

    def __init__(self, key_id: str, held: Sequence[str], what: str = "payload") -> None:
        self.key_id = key_id
        holding = ", ".join(held) if held else "none"
        super().__init__(
            f"{what} is encrypted under key id {key_id!r}, which is not in {KEYS_ENV} "
            f"(this process holds: {holding}); add that key to decrypt it"
        )


class DecryptionFailed(Exception):
    """The ciphertext does not authenticate under its key: altered, or not written by a key holder."""


class Keyring:
    """Named AES-256-GCM keys; the first one encrypts."""

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        if not keys:
            raise EncryptionKeyError(f"{KEYS_ENV} holds no key")
        for key_id, key in keys.items():
            if not KEY_ID_PATTERN.fullmatch(key_id):
                raise EncryptionKeyError(
                    f"{KEYS_ENV}: key id {key_id!r} must be 1 to 64 letters, digits, '.', '_' or '-'"
                )
            if len(key) != 32:
                raise EncryptionKeyError(f"{KEYS_ENV}: key {key_id!r} is {len(key)} bytes; AES-256 needs 32")
        self._keys = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self.active = next(iter(keys))

    @classmethod
    def parse(cls, text: str) -> Keyring:
        """``KEY_ID:BASE64_32_BYTES`` entries separated by commas (spaces around them ignored)."""
        keys: dict[str, bytes] = {}
        for n, entry in enumerate((e.strip() for e in text.split(",")), start=1):
            if not entry:
                continue
            key_id, sep, encoded = (part.strip() for part in entry.partition(":"))
            if not sep or not key_id or not encoded:
                raise EncryptionKeyError(f"{KEYS_ENV}: entry {n} is not KEY_ID:BASE64_32_BYTES")
            if key_id in keys:
                raise EncryptionKeyError(f"{KEYS_ENV}: key id {key_id!r} appears twice")
            keys[key_id] = _b64decode(encoded, key_id)
        return cls(keys)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Keyring | None:
        """The keyring ``CODEMODE_ENCRYPTION_KEYS`` configures, or None when it is unset or blank."""
        text = (os.environ if environ is None else environ).get(KEYS_ENV, "")
        return cls.parse(text) if text.strip() else None

    @property
    def key_ids(self) -> list[str]:
        return list(self._keys)

    def encrypt(self, plaintext: bytes, associated: bytes = b"") -> tuple[str, bytes]:
        """``(key id, nonce + ciphertext + tag)`` under the active key."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        return self.active, nonce + self._keys[self.active].encrypt(nonce, plaintext, associated)

    def decrypt(self, key_id: str, blob: bytes, associated: bytes = b"", *, what: str = "payload") -> bytes:
        aead = self._keys.get(key_id)
        if aead is None:
            raise UnknownEncryptionKey(key_id, self.key_ids, what)
        try:
            return aead.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated)
        except InvalidTag:
            raise DecryptionFailed(
                f"{what} does not authenticate under key {key_id!r}: it was altered, or not written by a holder of that key"
            ) from None


def new_key() -> str:
    """A fresh random key, base64 (what ``codemode keygen`` prints)."""
    return base64.b64encode(secrets.token_bytes(32)).decode()


def _b64decode(encoded: str, key_id: str) -> bytes:
    """Standard or URL-safe base64, padding optional."""
    padded = encoded.rstrip("=") + "=" * (-len(encoded.rstrip("=")) % 4)
    try:
        if "-" in encoded or "_" in encoded:
            return base64.urlsafe_b64decode(padded)
        return base64.b64decode(padded, validate=True)
    except (binascii.Error, ValueError):
        raise EncryptionKeyError(f"{KEYS_ENV}: key {key_id!r} is not valid base64") from None


class EncryptionCodec(PayloadCodec):
    """Each payload, serialized whole (metadata included), becomes ``binary/encrypted`` data
    under the active key, the key id in the clear in its metadata. Payloads that are not
    ``binary/encrypted`` (written before keys were set, external-storage references) pass
    through decode untouched."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.decrypt(p) for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        key_id, data = self.keyring.encrypt(payload.SerializeToString(), _PAYLOAD_AD + self.keyring.active.encode())
        return Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: key_id.encode()}, data=data)

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        key_id = payload.metadata.get(KEY_ID_METADATA, b"").decode(errors="replace")
        plain = self.keyring.decrypt(key_id, payload.data, _PAYLOAD_AD + key_id.encode())
        out = Payload()
        out.ParseFromString(plain)
        return out
