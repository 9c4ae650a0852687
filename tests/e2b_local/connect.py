"""Connect protocol with the JSON codec: just what envd's process service needs.

Unary calls are a JSON body in and a JSON body out; errors are a non-200 status with
``{"code": "<connect code>", "message": ...}``. Server streams answer 200 with
``application/connect+json`` and a sequence of envelopes (flags byte, big-endian
length, JSON); the last one has flag ``0x02`` and carries ``{}`` or ``{"error": ...}``.
See ``../shared/research/e2b-wire.md`` section 3.4.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from aiohttp import web

STREAM_CONTENT_TYPE = "application/connect+json"
_ENVELOPE = struct.Struct(">BI")
_END_STREAM = 0x02

#: Connect error code -> HTTP status, for unary errors.
HTTP_STATUS = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}


class ConnectError(Exception):
    """An RPC failure with a Connect code (``not_found``, ``invalid_argument``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def body(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message}


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def frame(message: dict[str, Any], *, end: bool = False) -> bytes:
    data = _dumps(message)
    return _ENVELOPE.pack(_END_STREAM if end else 0, len(data)) + data


def read_envelope(body: bytes) -> dict[str, Any]:
    """The single message of a server-streaming request body."""
    if len(body) < _ENVELOPE.size:
        raise ConnectError("invalid_argument", "missing request envelope")
    _flags, size = _ENVELOPE.unpack_from(body)
    data = body[_ENVELOPE.size : _ENVELOPE.size + size]
    return _parse(data)


def _parse(data: bytes) -> dict[str, Any]:
    try:
        message = json.loads(data or b"{}")
    except ValueError:
        raise ConnectError("invalid_argument", "request is not JSON") from None
    if not isinstance(message, dict):
        raise ConnectError("invalid_argument", "request is not a JSON object")
    return message


async def read_unary(request: web.Request) -> dict[str, Any]:
    return _parse(await request.read())


def unary_response(message: dict[str, Any]) -> web.Response:
    return web.Response(body=_dumps(message), content_type="application/json")


def unary_error(err: ConnectError) -> web.Response:
    return web.Response(status=HTTP_STATUS.get(err.code, 500), body=_dumps(err.body()), content_type="application/json")


async def open_stream(request: web.Request) -> web.StreamResponse:
    """A 200 chunked response for a server stream (no Content-Length: aiohttp chunks it)."""
    response = web.StreamResponse(status=200, headers={"Content-Type": STREAM_CONTENT_TYPE})
    await response.prepare(request)
    return response


async def end_stream(response: web.StreamResponse, error: ConnectError | None = None) -> None:
    await response.write(frame({"error": error.body()} if error else {}, end=True))
    await response.write_eof()
