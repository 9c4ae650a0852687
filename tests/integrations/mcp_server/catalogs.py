"""Signatures of generated catalogs of any size (built from JSON schemas, as an MCP server's
tools are), for the catalog tests and ``bench/mcp_front.py``. Not in ``catalog_tools``: every
public function there is a tool."""

from __future__ import annotations

from codemode.runtimes.signatures import ToolSignature, signature_from_json_schema
from tests.integrations.mcp_server.catalog_tools import _RECORDS, _VERBS


def generated_signatures(n: int) -> dict[str, ToolSignature]:
    """Signatures of ``n`` generated tools (the 300 of ``catalog_tools``, then numbered variants),
    for catalogs of any size in tests and benchmarks."""
    out = {}
    for i in range(n):
        record, (what, field, about) = list(_RECORDS.items())[i % len(_RECORDS)]
        verb, text = list(_VERBS.items())[(i // len(_RECORDS)) % len(_VERBS)]
        name = f"{verb}_{record}" + (f"_v{i // 300 + 1}" if i >= 300 else "")
        extra, kind = field.split(": ")
        schema = {
            "type": "object",
            "properties": {
                f"{record}_id": {"type": "string"},
                extra: {"type": "integer" if kind == "int" else "string"},
                "note": {"type": "string", "default": ""},
            },
            "required": [f"{record}_id"],
        }
        doc = f"{text.format(what=what)}. Part of {record.replace('_', ' ')} tools: {about}."
        out[name] = signature_from_json_schema(name, schema, description=doc, returns_schema={"type": "object"})
    return out
