"""Reading an execution's artifacts from a client: the bytes from the object store behind the
client's converter, unsealed with its keyring (``activities/artifacts.py`` wrote them)."""

from __future__ import annotations

from temporalio.client import Client

from codemode.activities.artifact_refs import Artifact
from codemode.activities.artifacts import ArtifactStore
from codemode.activities.checkpoints import CheckpointScope, CheckpointStore
from codemode.worker.converter import default_store, keyring_of, store_of


async def read_artifact(client: Client, execution_id: str, artifact: Artifact) -> bytes:
    """The bytes of one artifact of ``execution_id``; ``CheckpointUnusable`` when they are gone
    (removed with the execution) or do not match their hash."""
    store = store_of(client.data_converter) or await default_store()
    artifacts = ArtifactStore(CheckpointStore(store, keys=keyring_of(client.data_converter)))
    scope = CheckpointScope(namespace=client.namespace, execution_id=execution_id, first_run_id=artifact.run_id)
    return await artifacts.load(scope, artifact)
