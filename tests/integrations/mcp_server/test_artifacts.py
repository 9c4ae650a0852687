"""``execute`` over stdio returns a run's images as ``ImageContent`` and its other files as
embedded resources, after the text; ``structuredContent`` names them all."""

from __future__ import annotations

import base64
from typing import Any

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
CODE = (
    f"save_artifact('chart.png', {PNG!r})\n"
    "save_artifact('table.csv', 'a,b\\n1,2\\n')\n"
    "save_artifact('blob.bin', b'\\x00\\xff\\x01')\n"
    "'made three files'"
)


async def test_execute_returns_images_and_embedded_files(modern: Any) -> None:
    res = await modern.call_tool("execute", {"code": CODE})
    assert not res.is_error, res.content[0].text
    report = res.structured_content
    assert report["status"] == "completed"
    assert [(a["name"], a["mime_type"], a["size"]) for a in report["artifacts"]] == [
        ("chart.png", "image/png", len(PNG)),
        ("table.csv", "text/csv", 8),
        ("blob.bin", "application/octet-stream", 3),
    ]
    text, image, table, blob = res.content
    assert "artifacts (their contents follow):" in text.text and "chart.png · image/png" in text.text
    assert image.type == "image" and image.mime_type == "image/png" and base64.b64decode(image.data) == PNG
    assert table.type == "resource" and table.resource.text == "a,b\n1,2\n" and table.resource.mime_type == "text/csv"
    assert str(table.resource.uri).endswith("/artifacts/table.csv")
    assert blob.type == "resource" and base64.b64decode(blob.resource.blob) == bytes([0, 255, 1])
    again = await modern.call_tool("result", {"execution_id": report["execution_id"]})
    assert [c.type for c in again.content] == ["text", "image", "resource", "resource"]
