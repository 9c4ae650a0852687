"""The object store that keeps large state off the workflow history.

Two kinds of objects live there, both keyed under the execution that stored them:

* Temporal's claim-checked payloads: the SDK's ``ExternalStorage`` puts any payload at or
  above a size threshold (tool arguments and results, inputs, outputs, continue-as-new
  state) in the store and writes only a reference into the history. The driver is the
  SDK's own ``S3StorageDriver``, keys ``v0/ns/{ns}/wt/{type}/wi/{id}/ri/{run}/d/sha256/{hex}``.
* Checkpoints (Monty snapshots, session blobs): written by the sandbox steps themselves
  (``activities/checkpoints.py``), keys ``codemode/ns/{ns}/wi/{id}/ri/{first run}/cp/{sha256}``.

A ``BlobStore`` is the SDK's ``S3StorageDriverClient`` (so the SDK driver runs unchanged on
any store) plus the deletes and listing that retention needs. ``FileBlobStore`` is the
embedded default: a directory under the codemode data dir, good for one machine. An
S3-compatible service (``S3BlobStore``) is what workers on several machines share.

``StorageSettings.from_env()`` + ``open_blob_store()`` pick one: S3 when
``CODEMODE_S3_BUCKET`` is set, else files under ``<data dir>/blobs``.

One module per concern: ``blobs.py`` (the interface, its errors, the file store), ``s3.py``,
``settings.py`` (choosing from the environment), ``encryption.py`` (AES-256-GCM: the payload
codec and sealed checkpoints). This face names what the other layers use.
"""

from codemode.storage.blobs import (
    DEFAULT_BUCKET,
    BlobNotFound,
    BlobStore,
    BlobStoreError,
    BucketNotFound,
    FileBlobStore,
    key_segment,
)
from codemode.storage.s3 import S3BlobStore
from codemode.storage.settings import LazyBlobStore, StorageSettings, blob_store_for, default_file_root, open_blob_store

__all__ = [
    "DEFAULT_BUCKET",
    "BlobNotFound",
    "BlobStore",
    "BlobStoreError",
    "BucketNotFound",
    "FileBlobStore",
    "LazyBlobStore",
    "S3BlobStore",
    "StorageSettings",
    "blob_store_for",
    "default_file_root",
    "key_segment",
    "open_blob_store",
]
