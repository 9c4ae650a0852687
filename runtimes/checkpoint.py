"""A small versioned envelope around runtime checkpoints.

Monty snapshots are version-specific and not authenticated. The envelope names the
runtime and its version so a checkpoint from another version is refused cleanly
(``restore`` returns None and the caller falls back to replay), never fed to a VM
that would misread it.
"""

from __future__ import annotations

import json
import struct
from typing import Any

MAGIC = b"CMCP"
FORMAT = 1
_HEAD = struct.Struct(">4sBI")


def encode_checkpoint(runtime: str, version: str, meta: dict[str, Any], payload: bytes) -> bytes:
    header = json.dumps({"runtime": runtime, "version": version, "meta": meta}, separators=(",", ":")).encode()
    return _HEAD.pack(MAGIC, FORMAT, len(header)) + header + payload


def read_header(blob: bytes) -> dict[str, Any] | None:
    """The envelope's header, or None when ``blob`` is not a checkpoint of this format."""
    if len(blob) < _HEAD.size:
        return None
    magic, fmt, size = _HEAD.unpack_from(blob)
    if magic != MAGIC or fmt != FORMAT or len(blob) < _HEAD.size + size:
        return None
    try:
        header = json.loads(blob[_HEAD.size : _HEAD.size + size])
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def decode_checkpoint(blob: bytes, runtime: str, version: str) -> tuple[dict[str, Any], bytes] | None:
    """``(meta, payload)`` when the blob was written by this runtime at this version, else None."""
    header = read_header(blob)
    if header is None or header.get("runtime") != runtime or header.get("version") != version:
        return None
    size = _HEAD.unpack_from(blob)[2]
    return header.get("meta", {}), blob[_HEAD.size + size :]
