"""Artifacts in the object store: the step's answer to ``save_artifact``, and reading them back.

The bytes are sealed like checkpoints (``activities/checkpoints.py``: AES-256-GCM bound to the
execution and the kind ``art`` when encryption keys are set) and stored under the execution's
first run, ``codemode/ns/{ns}/wi/{execution}/ri/{first run}/art/{sha256}.{size}``, keyed by the
SHA-256 of the plain bytes: a retried or replayed step stores the same object again, never a
second one, and the retention sweep deletes them with the rest of the execution's objects.

Caps (``ArtifactLimits``): per file and per execution, from ``CODEMODE_ARTIFACT_MAX_BYTES``
and ``CODEMODE_ARTIFACTS_MAX_BYTES``. Past either, the call raises ``ValueError`` in the code
with the sizes and the setting to raise, and nothing is stored.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from codemode.runtimes.artifacts import check_name, guess_mime
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.types import FunctionCall
from codemode.storage import BlobNotFound, BlobStore

from .artifact_refs import Artifact
from .checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable, seal, unseal
from .models import human_bytes

FILE_ENV = "CODEMODE_ARTIFACT_MAX_BYTES"
TOTAL_ENV = "CODEMODE_ARTIFACTS_MAX_BYTES"
KIND = "art"


def _env_bytes(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


@dataclass(frozen=True)
class ArtifactLimits:
    #: The largest single artifact.
    file_bytes: int = 20 * 1024 * 1024
    #: All the artifacts of one execution together.
    execution_bytes: int = 100 * 1024 * 1024

    @classmethod
    def from_env(cls) -> ArtifactLimits:
        base = cls()
        return cls(_env_bytes(FILE_ENV, base.file_bytes), _env_bytes(TOTAL_ENV, base.execution_bytes))


def artifact_key(scope: CheckpointScope, sha256: str, size: int) -> str:
    return f"{scope.root}{KIND}/{sha256}.{size}"


class ArtifactStore:
    """Save (capped, sealed) and load the artifacts of executions, in the checkpoints' store."""

    def __init__(self, checkpoints: CheckpointStore, limits: ArtifactLimits | None = None) -> None:
        self.checkpoints = checkpoints
        self.limits = limits or ArtifactLimits.from_env()

    @property
    def _store(self) -> BlobStore:
        return self.checkpoints.store

    async def stored_bytes(self, scope: CheckpointScope, *, besides: str = "") -> int:
        """What the execution's artifacts hold in the store, without the one ``besides``."""
        total = 0
        prefix = f"{scope.root}{KIND}/"
        for key in await self._store.list_keys(bucket=self.checkpoints.bucket, prefix=prefix):
            sha, _, size = key[len(prefix) :].partition(".")
            if sha != besides and size.isdigit():
                total += int(size)
        return total

    async def serve(self, scope: CheckpointScope, call: FunctionCall, data: bytes | None) -> JournalEntry:
        """Answer one ``save_artifact`` call (in its small form, ``runtimes/artifacts.py``):
        store its bytes and return the reference, or the error the code raises."""
        name = call.args[0] if call.args else call.kwargs.get("name")
        problem = check_name(name) if name is not None else "missing argument 'name'"
        if problem is not None:
            return JournalEntry.raised(
                call, "TypeError" if "must be a str" in problem else "ValueError", f"save_artifact(): {problem}"
            )
        small = call.kwargs.get("data") or {}
        if "error" in small:
            return JournalEntry.raised(call, "TypeError", f"save_artifact(): {small['error']}")
        mime = call.kwargs.get("mime_type")
        if mime is not None and (not isinstance(mime, str) or "/" not in mime):
            return JournalEntry.raised(
                call, "ValueError", f"save_artifact(): mime_type must look like 'image/png', not {mime!r}"
            )
        size = int(small.get("size", 0))
        sha = str(small.get("sha256", ""))
        cap = self.limits.file_bytes
        if size > cap or data is None:
            why = f"is {human_bytes(size)}, over the {human_bytes(cap)} limit for one artifact ({FILE_ENV})"
            if data is None and size <= cap:
                why = "did not reach the host"
            return JournalEntry.raised(call, "ValueError", f"artifact {name!r} {why}")
        used = await self.stored_bytes(scope, besides=sha)
        total = self.limits.execution_bytes
        if used + size > total:
            return JournalEntry.raised(
                call,
                "ValueError",
                f"artifact {name!r} ({human_bytes(size)}) would bring this execution's artifacts to "
                f"{human_bytes(used + size)}, over the {human_bytes(total)} limit per execution ({TOTAL_ENV})",
            )
        key = artifact_key(scope, sha, size)
        bucket = self.checkpoints.bucket
        if not await self._store.object_exists(bucket=bucket, key=key):
            blob = data
            if self.checkpoints.keys is not None:
                blob = seal(self.checkpoints.keys, scope, data, KIND)
            await self._store.put_object(bucket=bucket, key=key, data=blob)
        ref = Artifact(name=name, mime_type=mime or guess_mime(name), size=size, sha256=sha)
        return JournalEntry.returned(call, ref.model_dump(exclude={"run_id"}))

    async def load(self, scope: CheckpointScope, artifact: Artifact) -> bytes:
        """The artifact's bytes, unsealed and checked against its hash; ``CheckpointUnusable``
        when they are gone (the retention sweep) or altered."""
        key = artifact_key(scope, artifact.sha256, artifact.size)
        try:
            blob = await self._store.get_object(bucket=self.checkpoints.bucket, key=key)
        except BlobNotFound:
            raise CheckpointUnusable(
                f"artifact {artifact.name!r} is no longer in {self._store.location()} (removed with its execution?)"
            ) from None
        data = unseal(self.checkpoints.keys, scope, blob, f"artifact {artifact.name!r}", KIND)
        if hashlib.sha256(data).hexdigest() != artifact.sha256:
            raise CheckpointUnusable(f"artifact {artifact.name!r} was altered in the store")
        return data
