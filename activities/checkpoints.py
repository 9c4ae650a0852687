"""Checkpoints by reference: the blob in the object store, its hash and size in the history.

A Monty snapshot grows with the code's heap (40,000 rows make megabytes) and a step writes
one per tool call, so it never travels through the history: the step stores it and returns
a ``CheckpointRef``. Keys are content-addressed under the execution's first run,
``codemode/ns/{ns}/wi/{execution}/ri/{first run}/cp/{sha256}``, so a retried step writes the
same object again and a reused execution id never collides with an older run's state.

Loading verifies the SHA-256 before anything reaches a sandbox: a blob that is missing or
altered raises ``CheckpointUnusable`` and the step falls back to journal replay, which the
audit reports.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from .models import CheckpointRef, human_bytes
from .storage import BlobNotFound, BlobStore, key_segment


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


class CheckpointStore:
    """Save, verify-and-load and delete checkpoints in a ``BlobStore``."""

    def __init__(self, store: BlobStore, bucket: str | None = None) -> None:
        self.store = store
        self.bucket = bucket or store.bucket

    async def save(self, scope: CheckpointScope, blob: bytes, kind: str = "cp") -> CheckpointRef:
        """Store ``blob`` (``kind`` ``cp``: a checkpoint; ``seg``: a segment of the state a
        long execution carries from run to run) and return its reference."""
        ref = CheckpointRef(sha256=hashlib.sha256(blob).hexdigest(), size=len(blob))
        await self.store.put_object(bucket=self.bucket, key=scope.key(ref, kind), data=blob)
        return ref

    async def load(self, scope: CheckpointScope, ref: CheckpointRef, kind: str = "cp") -> bytes:
        try:
            blob = await self.store.get_object(bucket=self.bucket, key=scope.key(ref, kind))
        except BlobNotFound:
            raise CheckpointUnusable(
                f"checkpoint {ref.sha256[:12]} is missing from {self.store.location()}"
            ) from None
        digest = hashlib.sha256(blob).hexdigest()
        if digest != ref.sha256 or len(blob) != ref.size:
            raise CheckpointUnusable(
                f"checkpoint {ref.sha256[:12]} was altered in the store (its SHA-256 is now "
                f"{digest[:12]}, {human_bytes(len(blob))} instead of {human_bytes(ref.size)})"
            )
        return blob

    async def delete(self, scope: CheckpointScope, *refs: CheckpointRef) -> None:
        keys = [scope.key(r) for r in refs]
        if keys:
            await self.store.delete_objects(bucket=self.bucket, keys=keys)

    async def delete_all(self, scope: CheckpointScope) -> int:
        return await self.store.delete_prefix(bucket=self.bucket, prefix=scope.prefix)
