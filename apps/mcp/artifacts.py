"""The files a run handed back, as MCP content after the report's text: an image as
``ImageContent``, any other file as an ``EmbeddedResource`` (text when it is UTF-8 text,
else a blob), each up to ``EMBED_MAX_BYTES``; a larger one only named in the report (with
the command that fetches it). The references are in ``structuredContent`` either way."""

from __future__ import annotations

import base64
import logging
from typing import Any
from urllib.parse import quote

from mcp_types import BlobResourceContents, EmbeddedResource, ImageContent, TextResourceContents

log = logging.getLogger(__name__)

#: Files embedded per answer, and the largest one embedded.
EMBEDDED_MAX = 8
EMBED_MAX_BYTES = 5 * 1024 * 1024
_TEXT_TYPES = ("application/json", "application/xml", "application/jsonl", "application/x-yaml", "image/svg+xml")


def artifact_uri(execution_id: str, name: str) -> str:
    return f"codemode://executions/{quote(execution_id, safe='')}/artifacts/{quote(name)}"


def _is_text(mime: str) -> bool:
    return mime.startswith("text/") or mime in _TEXT_TYPES


def content_of(execution_id: str, artifact: Any, data: bytes) -> ImageContent | EmbeddedResource:
    mime = artifact.mime_type
    if mime.startswith("image/") and mime != "image/svg+xml":
        return ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime)
    uri = artifact_uri(execution_id, artifact.name)
    if _is_text(mime):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            pass
        else:
            return EmbeddedResource(type="resource", resource=TextResourceContents(uri=uri, mime_type=mime, text=text))
    blob = base64.b64encode(data).decode("ascii")
    return EmbeddedResource(type="resource", resource=BlobResourceContents(uri=uri, mime_type=mime, blob=blob))


async def artifact_contents(
    client: Any, execution_id: str, artifacts: list[Any]
) -> list[ImageContent | EmbeddedResource]:
    """The content blocks of a finished run's artifacts (what can be read and is small enough)."""
    from codemode.activities.checkpoints import CheckpointUnusable
    from codemode.client.artifacts import read_artifact

    blocks: list[ImageContent | EmbeddedResource] = []
    for artifact in [a for a in artifacts if a.size <= EMBED_MAX_BYTES][:EMBEDDED_MAX]:
        try:
            data = await read_artifact(client, execution_id, artifact)
        except CheckpointUnusable as err:
            log.warning("artifact %s not embedded: %s", artifact.name, err)
            continue
        blocks.append(content_of(execution_id, artifact, data))
    return blocks
