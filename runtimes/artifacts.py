"""Artifacts, as the sandbox side sees them: the built-in host function ``save_artifact`` and
the outputs directory.

Code hands files back in two ways, on every runtime that has them:

* ``save_artifact(name, data, mime_type=None)``: a host function like a tool, on every
  runtime (Monty included). ``data`` is bytes or str (str is saved as UTF-8).
* files written under the outputs directory (``OUTPUTS_DIR``, also in the environment as
  ``CODEMODE_OUTPUTS_DIR``) on runtimes with a filesystem: when the code finishes, the runner
  hands each file to ``save_artifact`` itself, in name order, then removes it.

Either way the call's bytes never reach a history: ``CodeExecution`` takes them off the call
as it arrives (``detach``) and the call goes on with ``{"sha256", "size"}`` in their place.
That small form is what the journal records and what a replay compares, so a replayed
``save_artifact`` is answered from the journal like any tool and saves nothing twice. The
step that answers a fresh call seals the bytes in the object store
(``codemode.activities.artifacts``).
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from typing import Any

from .signatures import ToolParameter, ToolSignature
from .types import FunctionCall

#: The host function's name (reserved: no tool may take it).
SAVE_ARTIFACT = "save_artifact"
#: The global (and environment variable ``CODEMODE_OUTPUTS_DIR``) naming the outputs directory.
OUTPUTS_GLOBAL = "OUTPUTS_DIR"
OUTPUTS_ENV = "CODEMODE_OUTPUTS_DIR"
#: Where the runner makes it (inside the sandbox's private /tmp).
OUTPUTS_DIR = "/tmp/outputs"
#: How bytes travel from a CPython runner, whose wire is JSON: ``{"b64": "..."}``.
B64_KEY = "b64"
#: A file too big for the wire: the runner sends its size and hash only (the host refuses it).
OMITTED_KEY = "omitted"
#: The longest artifact name.
MAX_NAME = 255

SIGNATURE = ToolSignature(
    name=SAVE_ARTIFACT,
    parameters=[
        ToolParameter(name="name", annotation="str"),
        ToolParameter(name="data", annotation="bytes | str"),
        ToolParameter(name="mime_type", annotation="str | None", required=False, default_repr="None"),
    ],
    return_annotation="dict[str, Any]",
    description=(
        "Save a file for the user (a chart, a CSV, a report): it is returned with the execution's result. "
        "data is bytes or str (saved as UTF-8); the MIME type is guessed from the name when not given. "
        "Returns {'name', 'mime_type', 'size', 'sha256'}."
    ),
)


def prompt_text(filesystem: bool) -> str:
    """What the prompt tells a model about handing files back."""
    text = (
        f"To hand a file back to the user (a chart, a CSV, a report), call `{SAVE_ARTIFACT}(name, data)` with "
        "bytes or str; it is returned with the result, so do not print or return its contents."
    )
    if filesystem:
        text += (
            f" Files you write under the directory named by the global `{OUTPUTS_GLOBAL}` (for example "
            f'`plt.savefig(f"{{{OUTPUTS_GLOBAL}}}/chart.png")`) are returned the same way when the code finishes.'
        )
    return text


def guess_mime(name: str) -> str:
    guessed, _ = mimetypes.guess_type(name, strict=False)
    if guessed:
        return guessed
    lower = name.lower()
    for suffix, mime in (
        (".md", "text/markdown"),
        (".jsonl", "application/jsonl"),
        (".parquet", "application/vnd.apache.parquet"),
    ):
        if lower.endswith(suffix):
            return mime
    return "application/octet-stream"


def check_name(name: Any) -> str | None:
    """Why ``name`` cannot name an artifact, or None. A relative path of plain parts."""
    if not isinstance(name, str):
        return f"name must be a str, not {type(name).__name__}"
    if not name or len(name) > MAX_NAME:
        return f"name must have 1 to {MAX_NAME} characters"
    if "\0" in name or "\\" in name or name.startswith("/"):
        return f"name {name!r} must be a relative path with '/' between its parts"
    if any(part in ("", ".", "..") for part in name.split("/")):
        return f"name {name!r} must not have empty, '.' or '..' parts"
    return None


def _payload(data: Any) -> bytes | dict[str, Any] | str:
    """The bytes a ``data`` argument stands for; a digest dict the runner sent instead of a
    file too big for the wire; or why it is not data (a str starting with '!')."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, dict) and isinstance(data.get(B64_KEY), str) and len(data) == 1:
        try:
            return base64.b64decode(data[B64_KEY], validate=True)
        except ValueError:
            return "!data is not valid base64"
    if isinstance(data, dict) and data.get(OMITTED_KEY) is True:
        return {"sha256": str(data.get("sha256", "")), "size": int(data.get("size", 0))}
    return f"!data must be bytes or str, not {type(data).__name__}"


def detach(call: FunctionCall) -> tuple[FunctionCall, bytes | None]:
    """``save_artifact``'s call in its small form (``name``, ``data`` as ``{"sha256", "size"}``,
    ``mime_type``) and the bytes taken off it; None when the data is unusable (the small form
    then says why, under ``data.error``, and the step answers with an error)."""
    bound: dict[str, Any] = {}
    names = ["name", "data", "mime_type"]
    for i, value in enumerate(call.args[:3]):
        bound[names[i]] = value
    for key, value in call.kwargs.items():
        bound.setdefault(key, value)
    extra = call.args[3:]
    data: bytes | None = None
    small: dict[str, Any]
    payload = _payload(bound.get("data")) if "data" in bound else "!missing argument 'data'"
    if isinstance(payload, bytes):
        data = payload
        small = {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}
    elif isinstance(payload, dict):
        small = {**payload, "omitted": True}
    else:
        small = {"error": payload[1:]}
    kwargs: dict[str, Any] = {"data": small}
    if "mime_type" in bound:
        kwargs["mime_type"] = bound["mime_type"]
    unknown = sorted(set(bound) - set(names))
    if extra or unknown:
        kwargs["data"] = {"error": "save_artifact() takes name, data and mime_type only"}
        data = None
    args = [bound["name"]] if "name" in bound else []
    reduced = call.model_copy(update={"args": args, "kwargs": kwargs})
    return reduced, data


def encode_for_wire(data: bytes) -> dict[str, str]:
    return {B64_KEY: base64.b64encode(data).decode("ascii")}
