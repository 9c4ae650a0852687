"""Artifacts (``codemode.runtimes.artifacts``): ``save_artifact``'s bytes on the wire, and
the files the code leaves in its outputs directory, handed back when it ends."""

from __future__ import annotations

import os

SAVE_ARTIFACT = "save_artifact"
OUTPUTS_GLOBAL = "OUTPUTS_DIR"
OUTPUTS_ENV = "CODEMODE_OUTPUTS_DIR"
OUTPUTS_DIR = "/tmp/outputs"
#: A file bigger than this is sent as its size and hash only (the host refuses it): its
#: base64 would not fit the wire's largest message.
_WIRE_FILE_BYTES = 40 * 1024 * 1024


def _artifact_caller(call_sync):
    """``save_artifact``'s bytes cross the JSON wire as base64."""

    def call(name, args, kwargs, line):
        args, kwargs = list(args), dict(kwargs)
        if len(args) > 1:
            args[1] = _wire_data(args[1])
        elif "data" in kwargs:
            kwargs["data"] = _wire_data(kwargs["data"])
        return call_sync(name, args, kwargs, line)

    return call


def _wire_data(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        import binascii

        data = bytes(data)
        if len(data) > _WIRE_FILE_BYTES:
            import hashlib

            return {"omitted": True, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        return {"b64": binascii.b2a_base64(data, newline=False).decode("ascii")}
    return data


def _prepare_outputs(namespace):
    """Make the outputs directory and tell the code where it is; the ``save_artifact`` stub
    that hands its files back when the code ends, or None (no such stub, or no filesystem).
    Files left by an earlier cell of a session were handed back by that cell already."""
    save = namespace.get(SAVE_ARTIFACT)
    if not getattr(save, "__codemode_tool__", False):
        return None
    # /tmp/outputs in every sandbox (its private /tmp); a run without one (the python runtime's
    # isolation="none") has a TMPDIR of its own, so its outputs are not another run's.
    tmp = os.environ.get("TMPDIR") or "/tmp"
    path = os.environ.get(OUTPUTS_ENV) or (OUTPUTS_DIR if tmp.rstrip("/") == "/tmp" else os.path.join(tmp, "outputs"))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    os.environ[OUTPUTS_ENV] = path
    namespace[OUTPUTS_GLOBAL] = path
    return save, path


def _save_outputs(save) -> None:
    """Hand each file under the outputs directory to ``save_artifact`` (name order), then
    remove it. A refusal (over a cap) is the code's error, as it would be for its own call."""
    fn, root = save
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in files:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not os.path.islink(path):
                found.append((os.path.relpath(path, root).replace(os.sep, "/"), path))
    for name, path in sorted(found):
        with open(path, "rb") as f:
            data = f.read()
        fn(name, data)
        os.unlink(path)
