"""An MCP tool result as the Python value the code gets.

- ``structuredContent``: as is (a dict);
- text: a ``str``, parsed as JSON when the tool declares an output schema;
- images, audio and binary embedded resources: a small dict handle
  ``{"type", "mime_type", "size", "sha256", "ref"}``, the bytes stored in the object store
  under the execution (sealed like checkpoints when encryption keys are set, deleted with
  the execution's other objects by the retention sweep), never in the history;
- text embedded resources: ``{"type": "resource", "uri", "mime_type", "text"}``;
- resource links: ``{"type": "resource_link", "uri", "name", "mime_type", "description"}``;
- one block: that value; several: a list of them; none: ``None``.

``isError`` is not a value: the caller raises it in the code.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

#: Stores bytes for a handle: ``(data, mime_type) -> handle fields`` (``ref``, ``sha256``).
SaveBytes = Callable[[bytes, str], Awaitable[dict[str, Any]]]


def error_text(result: CallToolResult) -> str:
    """What a server said in an ``isError`` result (its text blocks)."""
    texts = [b.text for b in result.content if isinstance(b, TextContent) and b.text.strip()]
    return "\n".join(texts).strip() or "the server reported an error without a message"


async def result_value(result: CallToolResult, *, has_output_schema: bool, save: SaveBytes | None) -> Any:
    """The value of a successful result (see the module docstring)."""
    if result.structured_content is not None:
        return result.structured_content
    values = [await _block_value(b, save) for b in result.content]
    if has_output_schema and len(values) == 1 and isinstance(values[0], str):
        try:
            return json.loads(values[0])
        except ValueError:
            return values[0]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


async def _block_value(block: Any, save: SaveBytes | None) -> Any:
    if isinstance(block, TextContent):
        return block.text
    if isinstance(block, (ImageContent, AudioContent)):
        kind = "image" if isinstance(block, ImageContent) else "audio"
        return await _handle(kind, _decode(block.data), block.mime_type, save)
    if isinstance(block, EmbeddedResource):
        res = block.resource
        if isinstance(res, TextResourceContents):
            return {"type": "resource", "uri": str(res.uri), "mime_type": res.mime_type, "text": res.text}
        if isinstance(res, BlobResourceContents):
            handle = await _handle("resource", _decode(res.blob), res.mime_type or "application/octet-stream", save)
            return {**handle, "uri": str(res.uri)}
    if isinstance(block, ResourceLink):
        return {
            "type": "resource_link",
            "uri": str(block.uri),
            "name": block.name,
            "mime_type": block.mime_type,
            "description": block.description,
        }
    # A block type this SDK knows and we do not: its JSON, minus any inline bytes.
    dumped = (
        block.model_dump(mode="json", exclude_none=True) if hasattr(block, "model_dump") else {"value": repr(block)}
    )
    for key in ("data", "blob"):
        dumped.pop(key, None)
    return dumped


def _decode(data: str | bytes) -> bytes:
    if isinstance(data, bytes):
        return data
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data.encode()


async def _handle(kind: str, data: bytes, mime_type: str, save: SaveBytes | None) -> dict[str, Any]:
    handle: dict[str, Any] = {"type": kind, "mime_type": mime_type, "size": len(data)}
    if save is not None:
        handle.update(await save(data, mime_type))
    else:
        handle["ref"] = None  # no object store here (a registry used outside a worker)
    return handle
