"""Checkpoints by reference: the blob in the object store, its hash and size in the history.

A Monty snapshot grows with the code's heap (40,000 rows make megabytes) and a step writes
one per tool call, so it never travels through the history: the step stores it and returns
a ``CheckpointRef``. Keys are content-addressed under the execution's first run,
``codemode/ns/{ns}/wi/{execution}/ri/{first run}/cp/{sha256}``, so a retried step writes the
same object again and a reused execution id never collides with an older run's state.

Loading verifies the SHA-256 before anything reaches a sandbox: a blob that is missing or
altered raises ``CheckpointUnusable`` and the step falls back to journal replay, which the
audit reports.

With encryption keys (``storage/encryption.py``) each checkpoint (and each stored segment
of a long execution's state) is also sealed: AES-256-GCM under the active key, with the
execution it belongs to and its kind as associated data, behind a small header naming the key
(``CMCK1`` + key id length + key id). The reference's hash is the sealed blob's. A checkpoint
that does not open (altered, sealed for another execution, written without the key, or not
sealed at all) is refused the same way, so nothing a key holder did not write for this
execution is ever loaded into a sandbox.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from temporalio import activity
from temporalio.exceptions import ApplicationError

from codemode.storage import BlobNotFound, BlobStore, key_segment
from codemode.storage.encryption import DecryptionFailed, Keyring, UnknownEncryptionKey

from .models import CheckpointRef, SegmentRef, SessionScope, StateSegment, human_bytes


class CheckpointUnusable(Exception):
    """The checkpoint cannot be loaded; the message says why (for the audit)."""


@dataclass(frozen=True)
class CheckpointScope:
    """Whose checkpoints: one execution (all the runs of its continue-as-new chain)."""

    namespace: str
    execution_id: str
    first_run_id: str

    @property
    def root(self) -> str:
        return (
            f"codemode/ns/{key_segment(self.namespace)}/wi/{key_segment(self.execution_id)}"
            f"/ri/{key_segment(self.first_run_id)}/"
        )

    @property
    def prefix(self) -> str:
        """Where its checkpoints are."""
        return self.root + "cp/"

    def key(self, ref: CheckpointRef, kind: str = "cp") -> str:
        return f"{self.root}{kind}/{ref.sha256}"

    def associated_data(self, kind: str = "cp") -> bytes:
        """What a sealed blob is bound to: this execution (every run of it) and its kind."""
        return f"codemode/{kind}/v1\0{self.namespace}\0{self.execution_id}\0{self.first_run_id}".encode()


#: The header of a sealed blob: magic, then one byte of key-id length, then the key id.
SEAL_MAGIC = b"CMCK1"


def seal(keys: Keyring, scope: CheckpointScope, blob: bytes, kind: str = "cp") -> bytes:
    header = SEAL_MAGIC + bytes([len(keys.active)]) + keys.active.encode()
    _, sealed = keys.encrypt(blob, header + scope.associated_data(kind))
    return header + sealed


def unseal(keys: Keyring | None, scope: CheckpointScope, blob: bytes, name: str, kind: str = "cp") -> bytes:
    """The content of a sealed blob; ``CheckpointUnusable`` if it is not one this keyring
    sealed for ``scope`` and ``kind``. A key this process does not hold is different for a
    segment of the carried state: there is no replay to fall back on, and the data is intact,
    so ``UnknownEncryptionKey`` is raised as it is (a worker that holds the key can read it)."""
    if not blob.startswith(SEAL_MAGIC):
        if keys is None:
            return blob
        raise CheckpointUnusable(f"{name} is not sealed: it was not written by a holder of the encryption keys")
    n = blob[len(SEAL_MAGIC)] if len(blob) > len(SEAL_MAGIC) else 0
    header_end = len(SEAL_MAGIC) + 1 + n
    key_id = blob[len(SEAL_MAGIC) + 1 : header_end].decode(errors="replace")
    if keys is None:
        if kind != "cp":
            raise UnknownEncryptionKey(key_id, [], name)
        raise CheckpointUnusable(f"{name} is sealed under key {key_id!r} and this worker has no encryption keys")
    try:
        return keys.decrypt(key_id, blob[header_end:], blob[:header_end] + scope.associated_data(kind), what=name)
    except UnknownEncryptionKey as err:
        if kind != "cp":
            raise
        raise CheckpointUnusable(str(err)) from None
    except DecryptionFailed as err:
        raise CheckpointUnusable(str(err)) from None


class CheckpointStore:
    """Save, verify-and-load and delete checkpoints in a ``BlobStore``; sealed under ``keys``
    when given (``worker/worker.py`` passes the client's keyring)."""

    def __init__(self, store: BlobStore, bucket: str | None = None, *, keys: Keyring | None = None) -> None:
        self.store = store
        self.bucket = bucket or store.bucket
        self.keys = keys

    async def save(self, scope: CheckpointScope, blob: bytes, kind: str = "cp") -> CheckpointRef:
        """Store ``blob`` (``kind`` ``cp``: a checkpoint; ``seg``: a segment of the state a
        long execution carries from run to run), sealed when there are keys, and return its
        reference."""
        if self.keys is not None:
            blob = seal(self.keys, scope, blob, kind)
        ref = CheckpointRef(sha256=hashlib.sha256(blob).hexdigest(), size=len(blob))
        await self.store.put_object(bucket=self.bucket, key=scope.key(ref, kind), data=blob)
        return ref

    async def load(self, scope: CheckpointScope, ref: CheckpointRef, kind: str = "cp") -> bytes:
        try:
            blob = await self.store.get_object(bucket=self.bucket, key=scope.key(ref, kind))
        except BlobNotFound:
            raise CheckpointUnusable(f"checkpoint {ref.sha256[:12]} is missing from {self.store.location()}") from None
        # Sealed: authenticate first (it says whether a key holder wrote it for this execution).
        name = f"checkpoint {ref.sha256[:12]}" if kind == "cp" else f"stored state {ref.sha256[:12]}"
        checkpoint = unseal(self.keys, scope, blob, name, kind)
        digest = hashlib.sha256(blob).hexdigest()
        if digest != ref.sha256 or len(blob) != ref.size:
            raise CheckpointUnusable(
                f"checkpoint {ref.sha256[:12]} was altered in the store (its SHA-256 is now "
                f"{digest[:12]}, {human_bytes(len(blob))} instead of {human_bytes(ref.size)})"
            )
        return checkpoint

    async def delete(self, scope: CheckpointScope, *refs: CheckpointRef, kind: str = "cp") -> None:
        await self.delete_many([(scope, r) for r in refs], kind=kind)

    async def delete_many(self, items: list[tuple[CheckpointScope, CheckpointRef]], kind: str = "cp") -> None:
        """Delete checkpoints of any executions in one store call (batched by the store)."""
        keys = [scope.key(ref, kind) for scope, ref in items]
        if keys:
            await self.store.delete_objects(bucket=self.bucket, keys=keys)

    async def delete_all(self, scope: CheckpointScope) -> int:
        return await self.store.delete_prefix(bucket=self.bucket, prefix=scope.prefix)


def step_scope(execution_id: str, first_run_id: str) -> CheckpointScope:
    namespace = activity.info().workflow_namespace if activity.in_activity() else "default"
    return CheckpointScope(namespace=namespace, execution_id=execution_id, first_run_id=first_run_id)


def session_scope(scope: SessionScope) -> CheckpointScope:
    namespace = activity.info().workflow_namespace if activity.in_activity() else "default"
    return CheckpointScope(namespace=namespace, execution_id=scope.session_id, first_run_id=scope.first_run_id)


async def load_segments(checkpoints: CheckpointStore, scope: CheckpointScope, refs: list[SegmentRef]) -> StateSegment:
    """A long run's (or a cell's) stored state segments, joined (their hashes verified)."""
    whole = StateSegment()
    for ref in refs:
        try:
            part = StateSegment.model_validate_json(await checkpoints.load(scope, ref, kind="seg"))
        except CheckpointUnusable as err:  # unlike a checkpoint, the journal has no fallback
            raise ApplicationError(f"the execution's stored state is unusable: {err}", type="StateLost") from err
        whole.journal.extend(part.journal)
        whole.calls.extend(part.calls)
    return whole
